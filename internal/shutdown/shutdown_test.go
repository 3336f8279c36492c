package shutdown_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/shutdown"
)

// Wait keeps the delay for SIGTERM and the end of ctx, drops it for SIGINT and a failure, and
// reloads on SIGHUP without stopping.
func TestWait(t *testing.T) {
	const delay = 5 * time.Second
	for _, tc := range []struct {
		name    string
		signals []os.Signal
		cancel  bool
		fail    bool
		want    time.Duration
		reloads int
	}{
		{"SIGTERM", []os.Signal{syscall.SIGTERM}, false, false, delay, 0},
		{"SIGINT", []os.Signal{os.Interrupt}, false, false, 0, 0},
		{"SIGHUP then SIGTERM", []os.Signal{syscall.SIGHUP, syscall.SIGHUP, syscall.SIGTERM}, false, false, delay, 2},
		{"ctx ends", nil, true, false, delay, 0},
		{"a listener fails", nil, false, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signals := make(chan os.Signal, len(tc.signals))
			for _, s := range tc.signals {
				signals <- s
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			failed := make(chan struct{})
			if tc.fail {
				close(failed)
			}
			reloads := 0
			if got := shutdown.Wait(ctx, signals, failed, delay, func() { reloads++ }); got != tc.want || reloads != tc.reloads {
				t.Errorf("Wait = %s after %d reloads, want %s after %d", got, reloads, tc.want, tc.reloads)
			}
		})
	}
}

// A second SIGTERM or SIGINT cuts the delay short; SIGHUP does not; a failure ends it. The
// log says the delay, and a signal that cut it short; no delay is no wait, and no log.
func TestDelay(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	signals := make(chan os.Signal, 2)
	signals <- syscall.SIGHUP
	signals <- syscall.SIGTERM
	if !shutdown.Delay(log, signals, nil, time.Hour) {
		t.Error("a second SIGTERM did not cut the delay")
	}
	for _, want := range []string{`msg="shutting down: not ready, still serving" delay=1h0m0s`, "delay cut short by a second signal"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %q lacks %q", logs.String(), want)
		}
	}
	logs.Reset()
	failed := make(chan struct{})
	close(failed)
	if shutdown.Delay(log, make(chan os.Signal), failed, time.Hour) {
		t.Error("a failure counted as a signal")
	}
	if shutdown.Delay(log, make(chan os.Signal), nil, time.Millisecond) {
		t.Error("the delay's end counted as a signal")
	}
	if strings.Contains(logs.String(), "cut short") {
		t.Errorf("a delay that was not cut short logged %q", logs.String())
	}
	logs.Reset()
	if shutdown.Delay(log, signals, nil, 0) || logs.Len() != 0 {
		t.Errorf("no delay: logged %q", logs.String())
	}
}

// Served is nil for a server shut down, and names the listener of any other error.
func TestServed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{}
	done := make(chan error, 1)
	go func() { done <- shutdown.Serve("API", srv, ln) }()
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("after Shutdown: %v", err)
	}
	if err := shutdown.Served("metrics", errors.New("boom")); err == nil || !strings.HasPrefix(err.Error(), "metrics listener: ") {
		t.Errorf("Served = %v", err)
	}
}

// Stop lets a request in flight finish within ctx; past it, it cuts the request's connection
// and says the shutdown did not finish.
func TestStop(t *testing.T) {
	for _, finishes := range []bool{true, false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		entered, finish := make(chan struct{}), make(chan struct{})
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			select {
			case <-finish:
			case <-r.Context().Done(): // its connection cut
			}
		})}
		go shutdown.Serve("API", srv, ln)
		answered := make(chan error, 1)
		go func() {
			resp, err := http.Get("http://" + ln.Addr().String())
			if err == nil {
				resp.Body.Close()
			}
			answered <- err
		}()
		<-entered
		ctx, cancel := context.WithCancel(context.Background())
		if finishes {
			close(finish) // the request ends while Stop waits for it
		} else {
			cancel() // no time left: Stop cuts the request
		}
		err = shutdown.Stop(ctx, srv)
		cancel()
		if got := <-answered; finishes != (err == nil && got == nil) {
			t.Errorf("finishes %v: Stop = %v, the request got %v", finishes, err, got)
		}
		if !finishes && !errors.Is(err, context.Canceled) {
			t.Errorf("Stop past its context = %v, want context.Canceled", err)
		}
	}
}
