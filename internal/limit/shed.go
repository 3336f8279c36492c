package limit

import (
	"context"
	"net/http"
	"time"
)

// Shedder bounds the lookups running at once, for every listener alike: up to limit run, up
// to limit more wait at most wait for a slot, and the rest are refused at once, instead of
// queueing without bound while latency grows for everyone. A nil Shedder admits everything.
type Shedder struct {
	running chan struct{}
	waiting chan struct{}
	wait    time.Duration
}

// NewShedder returns a shedder of limit slots; nil, which sheds nothing, for a limit of 0 or
// less.
func NewShedder(limit int, wait time.Duration) *Shedder {
	if limit <= 0 {
		return nil
	}
	return &Shedder{running: make(chan struct{}, limit), waiting: make(chan struct{}, limit), wait: wait}
}

// Admit takes a slot, waiting for one if there is room in the line, until the wait ends or
// ctx does; it says whether it took one, which the caller gives back with Release.
func (sh *Shedder) Admit(ctx context.Context) bool {
	if sh == nil {
		return true
	}
	select {
	case sh.running <- struct{}{}:
		return true
	default:
	}
	select {
	case sh.waiting <- struct{}{}:
	default:
		return false
	}
	defer func() { <-sh.waiting }()
	timer := time.NewTimer(sh.wait)
	defer timer.Stop()
	select {
	case sh.running <- struct{}{}:
		return true
	case <-timer.C:
	case <-ctx.Done(): // the client left while waiting
	}
	return false
}

// Release gives back a slot that Admit took.
func (sh *Shedder) Release() {
	if sh != nil {
		<-sh.running
	}
}

// TooBusy is the message of a request shed.
const TooBusy = "too many lookups in flight; retry shortly"

// Middleware sheds HTTP requests: one refused gets 429 with Retry-After. A request holds its
// slot until its answer begins (its first write): a client that reads its answer slowly holds
// none. Put it after whatever reads the request's input (Bodies.Limit), so that a client still
// sending holds none either.
func (sh *Shedder) Middleware(refuse Refuse) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if sh == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !sh.Admit(r.Context()) {
				w.Header().Set("Retry-After", "1")
				refuse(w, r, http.StatusTooManyRequests, TooBusy)
				return
			}
			sw := &slotWriter{ResponseWriter: w, sh: sh, held: true}
			defer sw.release()
			next.ServeHTTP(sw, r)
		})
	}
}

// slotWriter gives its request's slot back at the first write of the answer.
type slotWriter struct {
	http.ResponseWriter
	sh   *Shedder
	held bool
}

func (w *slotWriter) release() {
	if w.held {
		w.held = false
		w.sh.Release()
	}
}

func (w *slotWriter) WriteHeader(code int) { w.release(); w.ResponseWriter.WriteHeader(code) }

func (w *slotWriter) Write(b []byte) (int, error) { w.release(); return w.ResponseWriter.Write(b) }

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *slotWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
