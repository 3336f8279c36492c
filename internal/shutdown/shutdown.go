// Package shutdown is the order in which bigseg's listeners stop, as load balancers need it:
// the signals that begin a shutdown (SIGTERM gracefully, SIGINT at once) and the delay during
// which a server still serves but says it is not ready, and the listeners' errors, each naming
// its listener. The servers themselves are cmd/server's.
package shutdown

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// Wait blocks until the server must stop, and returns how long it should still serve while
// not ready (its delay): delay once ctx ends or SIGTERM arrives, none after SIGINT (Ctrl-C in a
// terminal: no load balancer to wait for) or once failed ends (a listener failed: none is worth
// waiting for). SIGHUP calls reload, and Wait goes on.
func Wait(ctx context.Context, signals <-chan os.Signal, failed <-chan struct{}, delay time.Duration, reload func()) time.Duration {
	for {
		select {
		case <-failed:
			return 0
		case <-ctx.Done():
			return delay
		case sig := <-signals:
			switch sig {
			case syscall.SIGHUP:
				reload()
			case os.Interrupt:
				return 0
			default:
				return delay
			}
		}
	}
}

// Delay waits out delay (none if it is 0), unless a second SIGTERM or SIGINT, or the end of
// failed, ends it first (SIGHUP does not); it says whether a signal cut it short. It logs the
// delay as it begins, and a signal that cuts it short.
func Delay(log *slog.Logger, signals <-chan os.Signal, failed <-chan struct{}, delay time.Duration) (cut bool) {
	if delay <= 0 {
		return false
	}
	log.Info("shutting down: not ready, still serving", "delay", delay.String(), "then", "a second SIGTERM or SIGINT ends the delay")
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return false
		case <-failed:
			return false
		case sig := <-signals:
			if sig != syscall.SIGHUP {
				log.Info("shutting down: delay cut short by a second signal")
				return true
			}
		}
	}
}

// Serve serves srv on ln, with TLS when srv has a TLS config, until it is shut down (see
// Served).
func Serve(name string, srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return Served(name, srv.ServeTLS(ln, "", ""))
	}
	return Served(name, srv.Serve(ln))
}

// Served is what a listener's Serve returning means: nil once it was shut down, else its
// error, naming the listener.
func Served(name string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("%s listener: %w", name, err)
}

// Stop shuts srv down: its listeners close at once and its requests in flight may finish
// until ctx ends; then the connections of those still running are cut, and the shutdown's
// error returned.
func Stop(ctx context.Context, srv *http.Server) error {
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
