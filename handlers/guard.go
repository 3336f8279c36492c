package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

// authenticate lets a request through only with "Authorization: Bearer <token>" naming one of
// the accepted tokens. Tokens are compared as SHA-256 digests in constant time, against every
// accepted token, so neither timing nor the answer tells which part was wrong.
func (a *handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bigseg"`)
			writeError(w, http.StatusUnauthorized, "a valid bearer token is required")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *handler) authorized(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	digest := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for _, t := range a.tokens {
		match |= subtle.ConstantTimeCompare(digest[:], t[:])
	}
	return match == 1
}

// shedder bounds the lookups running at once: up to limit run, up to limit more wait at most
// wait for a slot, and the rest are refused at once with 429, instead of queueing without
// bound while latency grows for everyone.
type shedder struct {
	running chan struct{}
	waiting chan struct{}
	wait    time.Duration
}

func newShedder(limit int, wait time.Duration) *shedder {
	return &shedder{running: make(chan struct{}, limit), waiting: make(chan struct{}, limit), wait: wait}
}

func (a *handler) shed(next http.Handler) http.Handler {
	s := a.shedder
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.running <- struct{}{}:
			defer func() { <-s.running }()
			next.ServeHTTP(w, r)
			return
		default:
		}
		select {
		case s.waiting <- struct{}{}:
		default:
			a.tooBusy(w)
			return
		}
		timer := time.NewTimer(s.wait)
		defer timer.Stop()
		select {
		case s.running <- struct{}{}:
			<-s.waiting
			defer func() { <-s.running }()
			next.ServeHTTP(w, r)
		case <-timer.C:
			<-s.waiting
			a.tooBusy(w)
		case <-r.Context().Done(): // the client left while waiting
			<-s.waiting
			a.tooBusy(w)
		}
	})
}

func (a *handler) tooBusy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusTooManyRequests, "too many lookups in flight; retry shortly")
}

// accessLog logs each answered request with its route pattern, never its path: paths hold
// context keys, which are personal data.
func (a *handler) logAccess(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "none"
		}
		a.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("route", route), slog.Int("code", code),
			slog.Float64("ms", float64(time.Since(start).Microseconds())/1000))
	})
}
