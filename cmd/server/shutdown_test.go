package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestGracefulShutdownUnderLoad runs the real program as a process, keeps lookups going from
// several clients the way a load balancer would (until readiness says 503), sends SIGTERM, and
// checks that no request failed and that the process exited within its shutdown deadline.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	const delay, timeout = time.Second, 5 * time.Second // the write timeout bounds the shutdown
	p := startProcess(t, map[string]string{"BIGSEG_LOG_LEVEL": "info", "BIGSEG_SEED_FILE": "../../examples/memberships.json",
		"BIGSEG_SHUTDOWN_DELAY": delay.String(), "BIGSEG_WRITE_TIMEOUT": timeout.String()})

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
				resp, err := client.Get(p.URL + "/memberships/alice")
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
			resp, err := http.Get(p.URL + "/readyz")
			if err == nil {
				resp.Body.Close()
			}
			closing := len(p.logs.find("shutting down: closing the listener, finishing requests")) > 0
			if err == nil && resp.StatusCode == 503 && signalled.Load() {
				readyFlipped <- !closing // 503 seen while the listener was still open
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
	signalled.Store(true)
	p.signal(t, syscall.SIGTERM)
	if !<-readyFlipped {
		t.Error("readiness did not turn 503 before the listener closed")
	}
	wg.Wait()
	if err := p.wait(t, delay+timeout+5*time.Second); err != nil { // the deadline, and slack for a busy machine
		t.Errorf("process exit: %v", err)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d requests failed before readiness flipped, e.g. %v\nlogs:\n%s", n, n+ok.Load(), failure.Load(), p.logs.all())
	}
	if duringDelay.Load() == 0 {
		t.Error("no lookup was answered after SIGTERM: the test did not test serving while draining")
	}
	for _, want := range []string{"shutting down: not ready, still serving", "shutting down: closing the listener, finishing requests", "stopped"} {
		if len(p.logs.find(want)) == 0 {
			t.Errorf("no %q in the logs", want)
		}
	}
	t.Logf("%d lookups answered, %d of them after SIGTERM", ok.Load(), duringDelay.Load())
}

// While draining, every answer says "Connection: close", so that clients on keep-alive
// connections reconnect (elsewhere, behind a load balancer) instead of sending a request on a
// connection the server is about to close: no request sent on a kept-alive connection fails,
// POSTs included (which clients cannot safely retry). Once the listener closes, new
// connections are refused (or, for the few the kernel had accepted but the server had not,
// reset): the client's cue to go elsewhere. The clients here are as plain as wrk's: they send
// the next request on the same connection at once, and never retry.
func TestDrainingClosesKeepAliveConnections(t *testing.T) {
	t.Parallel()
	p := startProcess(t, map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json", "BIGSEG_LOG_LEVEL": "info",
		"BIGSEG_SHUTDOWN_DELAY": "1s", "BIGSEG_WRITE_TIMEOUT": "5s"})
	addr := strings.TrimPrefix(p.URL, "http://")
	var c keepAliveCounts
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 64 { // as many as wrk -c64, where this was found
		wg.Go(func() { c.run(addr, stop) })
	}
	waitFor(t, "lookups on keep-alive connections", func() bool { return c.ok.Load() > 500 })
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Errorf("process exit: %v", err)
	}
	close(stop)
	wg.Wait()
	if n := c.reusedFailed.Load(); n > 0 {
		t.Errorf("%d requests sent on a kept-alive connection failed, e.g. %v", n, c.failure.Load())
	}
	if c.closeAsked.Load() == 0 {
		t.Error(`no answer during the shutdown delay said "Connection: close"`)
	}
	t.Logf("%d answered (%d with Connection: close)", c.ok.Load(), c.closeAsked.Load())
}

// keepAliveCounts is what keep-alive clients saw.
type keepAliveCounts struct {
	ok, closeAsked, reusedFailed atomic.Int64
	failure                      atomic.Value
}

// run posts lookups over one connection after another until stop, or until a new connection
// fails (the listener is closed).
func (c *keepAliveCounts) run(addr string, stop <-chan struct{}) {
	const body = `{"contextKeys":["alice","bob"]}`
	for {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		br := bufio.NewReader(conn)
		answered := 0
		for {
			select {
			case <-stop:
				conn.Close()
				return
			default:
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/memberships", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			err := req.Write(conn)
			var resp *http.Response
			if err == nil {
				resp, err = http.ReadResponse(br, req)
			}
			if err != nil {
				conn.Close()
				if answered == 0 {
					return // a connection that never got an answer: the listener closed
				}
				c.reusedFailed.Add(1)
				c.failure.Store(err.Error())
				break
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			c.ok.Add(1)
			answered++
			if resp.Close {
				c.closeAsked.Add(1)
				conn.Close()
				break
			}
		}
	}
}

// A second SIGTERM (or SIGINT) during the shutdown delay ends the delay: an operator need not
// wait out a long one.
func TestSecondSignalEndsTheDelay(t *testing.T) {
	t.Parallel()
	p := startProcess(t, map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json", "BIGSEG_LOG_LEVEL": "info",
		"BIGSEG_SHUTDOWN_DELAY": "1h"})
	p.signal(t, syscall.SIGTERM)
	p.logs.wait(t, "shutting down: not ready, still serving")
	p.signal(t, syscall.SIGINT)
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Errorf("process exit: %v", err)
	}
	for _, want := range []string{"shutting down: delay cut short by a second signal", "stopped"} {
		if len(p.logs.find(want)) == 0 {
			t.Errorf("no %q in the logs:\n%s", want, p.logs.all())
		}
	}
}

// SIGINT (Ctrl-C in a terminal) skips the shutdown delay: no load balancer waits there.
func TestInterruptSkipsTheDelay(t *testing.T) {
	t.Parallel()
	p := startProcess(t, map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json", "BIGSEG_LOG_LEVEL": "info",
		"BIGSEG_SHUTDOWN_DELAY": "1h"})
	p.signal(t, syscall.SIGINT)
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Errorf("process exit: %v", err)
	}
	if len(p.logs.find("shutting down: not ready, still serving")) > 0 || len(p.logs.find("stopped")) == 0 {
		t.Errorf("SIGINT waited for the delay, or did not stop cleanly:\n%s", p.logs.all())
	}
}
