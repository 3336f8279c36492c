package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/limit"
)

// brokenListener is a listener whose Accept fails for good once asked: a socket the kernel
// took away, a file descriptor closed by mistake.
type brokenListener struct {
	net.Listener
	closed chan struct{}
}

var errBroken = errors.New("accept: the socket is gone")

func (l *brokenListener) Accept() (net.Conn, error) { return nil, errBroken }

func (l *brokenListener) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return l.Listener.Close()
}

// Any listener's failure ends the program: the first to fail stops the others and run returns
// its error, so that the process exits (non-zero) and is restarted, rather than go on ready
// with a port that accepts connections and never answers.
func TestListenerFailureEndsTheProgram(t *testing.T) {
	t.Parallel()
	for _, which := range []string{"API", "Redis-protocol", "metrics"} {
		t.Run(which, func(t *testing.T) {
			cfg, err := configOf(map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json",
				"BIGSEG_RESP_ADDR": "127.0.0.1:0", "BIGSEG_METRICS_ADDR": "127.0.0.1:0",
				"BIGSEG_SHUTDOWN_DELAY": "1h"})
			if err != nil {
				t.Fatal(err)
			}
			setUpMu.Lock()
			a, err := newApp(context.Background(), cfg, slog.New(slog.DiscardHandler))
			setUpMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			defer a.close()
			ln := map[string]*limit.Listener{"API": a.ln, "Redis-protocol": a.respLn, "metrics": a.opsLn}[which]
			if ln == nil {
				t.Fatalf("no %s listener", which)
			}
			broken := &brokenListener{Listener: ln.Listener, closed: make(chan struct{})}
			ln.Listener = broken // beneath the connection limit
			api, respAddr := "http://"+a.ln.Addr().String(), a.respLn.Addr().String()
			done := make(chan error, 1)
			go func() { done <- a.run(context.Background(), make(chan os.Signal)) }()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("run still serving 20 s after a listener failed")
			}
			if !errors.Is(err, errBroken) || !strings.Contains(err.Error(), which) {
				t.Errorf("run: %v, want the %s listener's error", err, which)
			}
			select {
			case <-broken.closed:
			default:
				t.Error("the failed listener was not closed")
			}
			if resp, err := http.Get(api + "/readyz"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				t.Errorf("the API still answers (%d) after the %s listener failed", resp.StatusCode, which)
			}
			if c, err := net.Dial("tcp", respAddr); err == nil {
				c.Close()
				t.Errorf("the Redis-protocol listener still accepts connections after the %s listener failed", which)
			}
		})
	}
}
