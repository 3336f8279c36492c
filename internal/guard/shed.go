package guard

import (
	"net/http"
	"sync"
	"time"
)

// Shed is middleware that bounds the requests running at once: up to limit run, up to limit
// more wait at most wait for a slot, and the rest are refused at once with 429 and
// Retry-After, instead of queueing without bound while latency grows for everyone. A request
// holds its slot until its answer begins (its first write): a client that reads its answer
// slowly holds none. Put it after whatever reads the request's input (Bodies.Limit), so that
// a client still sending holds none either. A limit of 0 or less turns shedding off.
func Shed(limit int, wait time.Duration, refuse Refuse) func(http.Handler) http.Handler {
	if limit <= 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	sh := &shedder{running: make(chan struct{}, limit), waiting: make(chan struct{}, limit), wait: wait, refuse: refuse}
	return sh.middleware
}

type shedder struct {
	running chan struct{}
	waiting chan struct{}
	wait    time.Duration
	refuse  Refuse
}

func (sh *shedder) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sh.admit(r) {
			w.Header().Set("Retry-After", "1")
			sh.refuse(w, r, http.StatusTooManyRequests, "too many lookups in flight; retry shortly")
			return
		}
		sw := slotWriters.Get().(*slotWriter)
		sw.ResponseWriter, sw.sh, sw.held = w, sh, true
		defer func() {
			sw.release()
			sw.ResponseWriter = nil
			slotWriters.Put(sw)
		}()
		next.ServeHTTP(sw, r)
	})
}

// admit takes a slot, waiting for one if there is room in the line, until the wait ends or
// the client leaves.
func (sh *shedder) admit(r *http.Request) bool {
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
	case <-r.Context().Done(): // the client left while waiting
	}
	return false
}

// slotWriter gives its request's slot back at the first write of the answer. Pooled: it is
// made for every request shed.
type slotWriter struct {
	http.ResponseWriter
	sh   *shedder
	held bool
}

var slotWriters = sync.Pool{New: func() any { return new(slotWriter) }}

func (w *slotWriter) release() {
	if w.held {
		w.held = false
		<-w.sh.running
	}
}

func (w *slotWriter) WriteHeader(code int) { w.release(); w.ResponseWriter.WriteHeader(code) }

func (w *slotWriter) Write(b []byte) (int, error) { w.release(); return w.ResponseWriter.Write(b) }

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *slotWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
