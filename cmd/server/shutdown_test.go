package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestGracefulShutdownUnderLoad runs the real program as a process (this test binary, in
// server mode), keeps lookups going from several clients the way a load balancer would (until
// readiness says 503), sends SIGTERM, and checks that no request failed and that the process
// exited within its shutdown deadline.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	const delay, timeout = time.Second, 5 * time.Second
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "BIGSEG_TEST_AS_SERVER=1", "BIGSEG_ADDR=127.0.0.1:0", "BIGSEG_LOG_LEVEL=info",
		"BIGSEG_SEED_FILE=../../examples/memberships.json", "BIGSEG_REDIS_URL=",
		"BIGSEG_SHUTDOWN_DELAY="+delay.String(), "BIGSEG_SHUTDOWN_TIMEOUT="+timeout.String())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	addr := make(chan string, 1)
	var closing atomic.Bool // the "closing the listener" log line was seen
	var logs strings.Builder
	var logsMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logsMu.Lock()
			logs.WriteString(sc.Text() + "\n")
			logsMu.Unlock()
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				continue
			}
			switch rec["msg"] {
			case "listening":
				addr <- rec["addr"].(string)
			case "shutting down: closing the listener, finishing requests":
				closing.Store(true)
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(10 * time.Second):
		t.Fatal("server did not start")
	}

	var drained atomic.Bool // readiness said 503: the "load balancer" sends nothing new
	var ok, failed atomic.Int64
	var failure atomic.Value
	var duringDelay atomic.Int64 // answered after SIGTERM, before readiness flipped or during the delay
	var signalled atomic.Bool
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second}
			defer client.CloseIdleConnections()
			for !drained.Load() {
				resp, err := client.Get(base + "/memberships/alice")
				if err != nil {
					failed.Add(1)
					failure.Store(err.Error())
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
					failure.Store(resp.Status)
					continue
				}
				ok.Add(1)
				if signalled.Load() {
					duringDelay.Add(1)
				}
			}
		})
	}
	// The load balancer's health check.
	readyFlipped := make(chan bool, 1)
	wg.Go(func() {
		for {
			resp, err := http.Get(base + "/readyz")
			if err == nil {
				resp.Body.Close()
			}
			if err == nil && resp.StatusCode == 503 && signalled.Load() {
				readyFlipped <- !closing.Load() // 503 seen while the listener was still open
				drained.Store(true)
				return
			}
			if err != nil && signalled.Load() {
				readyFlipped <- false
				drained.Store(true)
				return
			}
			time.Sleep(10 * time.Millisecond) // the health check's interval
		}
	})

	waitFor(t, "lookups under load", func() bool { return ok.Load() > 200 })
	sent := time.Now()
	signalled.Store(true)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !<-readyFlipped {
		t.Error("readiness did not turn 503 before the listener closed")
	}
	wg.Wait()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("process exit: %v", err)
		}
	case <-time.After(delay + timeout + 5*time.Second): // the shutdown deadline, and slack for a busy machine
		t.Fatalf("process still running %s after SIGTERM", time.Since(sent).Round(time.Millisecond))
	}
	if n := failed.Load(); n > 0 {
		logsMu.Lock()
		t.Errorf("%d of %d requests failed before readiness flipped, e.g. %v\nlogs:\n%s", n, n+ok.Load(), failure.Load(), logs.String())
		logsMu.Unlock()
	}
	if duringDelay.Load() == 0 {
		t.Error("no lookup was answered after SIGTERM: the test did not test serving while draining")
	}
	logsMu.Lock()
	defer logsMu.Unlock()
	for _, want := range []string{"shutting down: not ready, still serving", "shutting down: closing the listener", "stopped"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %q in the logs", want)
		}
	}
	t.Logf("%d lookups answered, %d of them after SIGTERM", ok.Load(), duringDelay.Load())

}
