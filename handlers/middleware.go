package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
)

// noBodies refuses a body sent with GET, HEAD or OPTIONS, first: no such route reads one, and
// net/http would read one left unread at the client's pace. Another method is routed: only
// POST [/environments/{env}]/memberships reads a body, the rest answer 404 or 405, closing the
// connection without reading it (Error).
func (s *server) noBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions) {
			Error(w, r, http.StatusBadRequest, "this route takes no request body")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// closeWhenDraining answers "Connection: close" once shutdown has begun, so that clients
// reconnect elsewhere before the listener closes instead of losing a request on it.
func (s *server) closeWhenDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.svc.Draining() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a logged 500, not a dropped connection; http.ErrAbortHandler,
// a handler's way to abort on purpose, is passed on. A panic after the answer has begun (a
// streamed batch or inventory) aborts the connection instead: an error after part of a 200
// would read as a short answer.
func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.Log.Error("handler panic", "route", chi.RouteContext(r.Context()).RoutePattern(), "panic", v)
				if rec, ok := w.(*statusRecorder); ok && rec.code != 0 {
					panic(http.ErrAbortHandler)
				}
				Error(w, r, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// methodLabel is a standard method, or "other": made-up methods never become labels or fill logs.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "other"
}

// routeLabel is the request's chi route pattern, or "unmatched".
func routeLabel(r *http.Request) string {
	if p := chi.RouteContext(r.Context()).RoutePattern(); p != "" {
		return p
	}
	return "unmatched"
}

// statusRecorder remembers the status code a handler wrote; one a request observed.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// observed tells Observe about every request once it is answered.
func (s *server) observed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			code := rec.code
			if code == 0 {
				code = http.StatusOK
			}
			s.Observe(routeLabel(r), methodLabel(r.Method), code, time.Since(start))
		}()
		next.ServeHTTP(rec, r)
	})
}

// logRequests returns an observer that logs each answered request at debug level (nothing
// but the log's Enabled check when that level is off), by route pattern, never by path (paths
// hold context keys, which are personal data), then tells next.
func (s *server) logRequests(next RequestObserver) RequestObserver {
	return func(route, method string, code int, d time.Duration) {
		s.Log.LogAttrs(context.Background(), slog.LevelDebug, "request", slog.String("method", method),
			slog.String("route", route), slog.Int("code", code), slog.Float64("ms", float64(d.Microseconds())/1000))
		if next != nil {
			next(route, method, code, d)
		}
	}
}
