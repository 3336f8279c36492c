package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// shedder bounds the lookups running at once: up to limit run, up to limit more wait at most
// wait for a slot, and the rest are refused at once with 429, instead of queueing without
// bound while latency grows for everyone.
type shedder struct {
	running chan struct{}
	waiting chan struct{}
	wait    time.Duration
	release func() // gives a slot back: made once, so that admitting allocates nothing
}

func newShedder(limit int, wait time.Duration) *shedder {
	sh := &shedder{running: make(chan struct{}, limit), waiting: make(chan struct{}, limit), wait: wait}
	sh.release = func() { <-sh.running }
	return sh
}

func noRelease() {}

// admit takes a lookup slot for a request whose input has been read and checked, or answers
// 429 and returns false. The caller must call release once the lookup is answered. Slots are
// only taken once the request is complete, so that a client still sending (or sending
// slowly) never holds one.
func (s *server) admit(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	sh := s.shedder
	if sh == nil {
		return noRelease, true
	}
	select {
	case sh.running <- struct{}{}:
		return sh.release, true
	default:
	}
	select {
	case sh.waiting <- struct{}{}:
	default:
		s.tooBusy(w, r)
		return nil, false
	}
	defer func() { <-sh.waiting }()
	timer := time.NewTimer(sh.wait)
	defer timer.Stop()
	select {
	case sh.running <- struct{}{}:
		return sh.release, true
	case <-timer.C:
	case <-r.Context().Done(): // the client left while waiting
	}
	s.tooBusy(w, r)
	return nil, false
}

func (s *server) tooBusy(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "1")
	refuse(w, r, http.StatusTooManyRequests, "too many lookups in flight; retry shortly")
}

// refuse writes an error that turns a client away, and closes its connection: a client that
// retries at once must queue for a new connection like everyone else, not keep one to itself.
// A request body not yet read is cut off rather than read to its end (net/http reads up to
// 256 KiB of it, as slowly as the client sends it, to reuse the connection).
func refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	w.Header().Set("Connection", "close")
	if r.ContentLength != 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	writeError(w, code, msg)
}

// noBodies refuses a request body on every route but POST /memberships, before anything else
// is done with the request: no other route reads one, and a body left unread would be read
// by net/http after the answer, at the client's pace.
func (s *server) noBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && (r.Method != http.MethodPost || r.URL.Path != "/memberships") {
			refuse(w, r, http.StatusBadRequest, "this route takes no request body")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// openStream takes a status stream slot, or answers 503 with Retry-After and returns false.
func (s *server) openStream(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	select {
	case s.streams <- struct{}{}:
		return func() { <-s.streams }, true
	default:
		w.Header().Set("Retry-After", "5")
		refuse(w, r, http.StatusServiceUnavailable, "too many status streams open; retry later, or poll /status")
		return nil, false
	}
}

// logRequests returns an observer that logs each answered request at info level, by route
// pattern, never by path (paths hold context keys, which are personal data), then tells next.
func (s *server) logRequests(next RequestObserver) RequestObserver {
	return func(route, method string, code int, d time.Duration) {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", slog.String("method", method),
			slog.String("route", route), slog.Int("code", code), slog.Float64("ms", float64(d.Microseconds())/1000))
		if next != nil {
			next(route, method, code, d)
		}
	}
}
