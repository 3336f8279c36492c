// Package handlers is bigseg's HTTP API: chi routes over a segments.Service. routes.go lists
// every route; api/openapi.yaml describes them, and a test keeps the two equal.
package handlers

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/bigseg/bigseg/internal/guard"
	"github.com/bigseg/bigseg/segments"
)

// Defaults for the request limits.
const (
	DefaultMaxKeyBytes     = 1024
	DefaultMaxBatch        = 1000
	DefaultMaxBodyBytes    = 1 << 20
	DefaultBodyReadTimeout = 2 * time.Second
	DefaultMaxBatchRefs    = 100_000
	DefaultMaxStreams      = 1000
)

// RequestObserver is told about every request once it is answered: the route (a chi route
// pattern, or "unmatched"), the method (a standard one, or "other"), the status code and the
// duration. Both labels come from fixed sets, whatever clients send.
type RequestObserver func(route, method string, code int, d time.Duration)

type server struct {
	svc                *segments.Service
	log                *slog.Logger
	maxKeyBytes        int
	maxBatch           int
	maxBodyBytes       int64
	bodyReadTimeout    time.Duration
	maxBatchRefs       int
	bodyMemory         int64
	bodies             *bodyBudget
	streams            chan struct{} // one per open status stream
	observe            RequestObserver
	metrics            http.Handler
	storeName          string
	heartbeat          time.Duration
	streamWriteTimeout time.Duration
	stop               <-chan struct{}

	tokens    *guard.Tokens // none means open
	shedder   *shedder
	accessLog bool

	mux *chi.Mux
}

// Option configures the handler.
type Option func(*server)

// WithLogger sets where request problems are logged. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(s *server) { s.log = l } }

// WithMaxKeyBytes bounds the length of a context key in bytes. Default DefaultMaxKeyBytes.
func WithMaxKeyBytes(n int) Option { return func(s *server) { s.maxKeyBytes = n } }

// WithMaxBatch bounds the number of lookups in one POST /memberships. Default DefaultMaxBatch.
func WithMaxBatch(n int) Option { return func(s *server) { s.maxBatch = n } }

// WithMaxBodyBytes bounds request bodies. Default DefaultMaxBodyBytes.
func WithMaxBodyBytes(n int64) Option { return func(s *server) { s.maxBodyBytes = n } }

// WithBodyReadTimeout bounds how long a client may take to send a batch body; it is read
// before the request takes a lookup slot. Default DefaultBodyReadTimeout.
func WithBodyReadTimeout(d time.Duration) Option { return func(s *server) { s.bodyReadTimeout = d } }

// WithMaxBatchRefs bounds the segment refs one batch answer may hold, so that a small request
// cannot make a huge answer. Default DefaultMaxBatchRefs.
func WithMaxBatchRefs(n int) Option { return func(s *server) { s.maxBatchRefs = n } }

// WithBodyMemory bounds the memory of the batch bodies being read or answered at once (see
// bodyBudget), raised to what the largest batch needs if lower. Default DefaultBodyMemory.
func WithBodyMemory(n int64) Option { return func(s *server) { s.bodyMemory = n } }

// WithMaxStreams bounds the status streams open at once; beyond it, a stream is refused with
// 503 and Retry-After. Default DefaultMaxStreams.
func WithMaxStreams(n int) Option {
	return func(s *server) { s.streams = make(chan struct{}, max(n, 0)) }
}

// WithRequestObserver sets who is told about each request (metrics).
func WithRequestObserver(o RequestObserver) Option { return func(s *server) { s.observe = o } }

// WithMetrics serves h at /metrics.
func WithMetrics(h http.Handler) Option { return func(s *server) { s.metrics = h } }

// WithStoreName sets the store named in /status ("redis" or "memory").
func WithStoreName(name string) Option { return func(s *server) { s.storeName = name } }

// WithHeartbeat sets how often an idle status stream sends a comment. Default DefaultHeartbeat.
func WithHeartbeat(d time.Duration) Option { return func(s *server) { s.heartbeat = d } }

// WithStop ends every open status stream once stop is closed, so that the server's shutdown
// does not wait for streams that never end by themselves.
func WithStop(stop <-chan struct{}) Option { return func(s *server) { s.stop = stop } }

// WithAPITokens requires "Authorization: Bearer <token>", with one of tokens, on every
// /memberships route and on /status/stream (which holds a connection open). Probes, /status
// and /metrics stay open. No tokens means no check.
func WithAPITokens(tokens []string) Option {
	return func(s *server) { s.tokens, _ = guard.NewTokens(tokens, "", nil, nil) }
}

// WithTokens is WithAPITokens with tokens that may change (a file that is re-read).
func WithTokens(t *guard.Tokens) Option { return func(s *server) { s.tokens = t } }

// WithLoadShedding lets at most limit lookup requests run at once and at most limit more
// wait up to wait for a slot; others get 429 with Retry-After at once. Probes, /status and
// /metrics are never shed. A limit of 0 turns shedding off.
func WithLoadShedding(limit int, wait time.Duration) Option {
	return func(s *server) {
		s.shedder = nil
		if limit > 0 {
			s.shedder = newShedder(limit, wait)
		}
	}
}

// WithAccessLog logs every request at info level, by route pattern.
func WithAccessLog(on bool) Option { return func(s *server) { s.accessLog = on } }

// New returns the HTTP API over svc.
func New(svc *segments.Service, opts ...Option) http.Handler {
	s := newServer(svc, opts)
	s.routes(s.mux)
	return s.mux
}

// NewOps returns the handler of a listener for operations only: /metrics (WithMetrics) and
// the probes (/livez, /healthz, /readyz).
func NewOps(svc *segments.Service, opts ...Option) http.Handler {
	s := newServer(svc, opts)
	s.opsRoutes(s.mux)
	return s.mux
}

func newServer(svc *segments.Service, opts []Option) *server {
	s := &server{
		svc:                svc,
		log:                slog.New(slog.DiscardHandler),
		maxKeyBytes:        DefaultMaxKeyBytes,
		maxBatch:           DefaultMaxBatch,
		maxBodyBytes:       DefaultMaxBodyBytes,
		bodyReadTimeout:    DefaultBodyReadTimeout,
		maxBatchRefs:       DefaultMaxBatchRefs,
		bodyMemory:         DefaultBodyMemory,
		streams:            make(chan struct{}, DefaultMaxStreams),
		heartbeat:          DefaultHeartbeat,
		streamWriteTimeout: DefaultStreamWriteTimeout,
	}
	for _, o := range opts {
		o(s)
	}
	// Room for the largest batch at least: its body's buffer (read up to one byte past the
	// limit), and what decoding and answering it uses.
	s.bodies = newBodyBudget(max(s.bodyMemory, s.maxBodyBytes+1+s.batchUses(s.maxBodyBytes)))
	s.mux = chi.NewRouter()
	if s.accessLog {
		s.observe = s.logRequests(s.observe)
	}
	if s.observe != nil {
		s.mux.Use(s.observed) // outermost: it sees the 500 of a recovered panic
	}
	s.mux.Use(s.noBodies, s.closeWhenDraining, s.recoverer, middleware.GetHead)
	s.mux.NotFound(s.notFound)
	s.mux.MethodNotAllowed(s.methodNotAllowed)
	return s
}

// errorBody is every error response.
type errorBody struct {
	Error string `json:"error"`
}

// jsonMarshal is the one place values become JSON.
func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// writeJSON writes v as the JSON body of a response with the given status code. No answer
// may be cached: lookups are personal data, and the rest changes from one moment to the next.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := jsonMarshal(v)
	if err != nil { // only ever our own types: a bug
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes {"error": msg} with the given status code. msg is for the caller: it
// never holds internal details, which are logged instead.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/memberships/" {
		writeError(w, http.StatusNotFound, "context key is empty: GET /memberships/{contextKey}")
		return
	}
	refuse(w, r, http.StatusNotFound, "no such route: see /openapi.yaml")
}

// methodNotAllowed answers a method that a route does not have: OPTIONS with 204 and the
// Allow header, any other with 405 and Allow.
func (s *server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if s.mux.Match(chi.NewRouteContext(), m, path) {
			w.Header().Add("Allow", m)
			if m == http.MethodGet {
				w.Header().Add("Allow", http.MethodHead)
			}
		}
	}
	w.Header().Add("Allow", http.MethodOptions)
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	refuse(w, r, http.StatusMethodNotAllowed, "method "+methodLabel(r.Method)+" is not allowed here")
}

// closeWhenDraining asks clients to close their connections once shutdown has begun
// ("Connection: close" after each answer), so that they reconnect elsewhere before the
// listener closes, instead of losing a request sent on a connection that is closing.
func (s *server) closeWhenDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.svc.Draining() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// methodLabel is the method as metrics and logs may show it: a standard method, or "other",
// so that made-up methods never become new label values or fill logs.
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

// recoverer turns a panic into a 500 with a JSON body and a log line, instead of a dropped
// connection. http.ErrAbortHandler is passed on: it is how a handler aborts on purpose.
func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "route", chi.RouteContext(r.Context()).RoutePattern(), "panic", v)
				writeError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusRecorder remembers the status code a handler wrote.
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

var recorders = sync.Pool{New: func() any { return new(statusRecorder) }}

func (s *server) observed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := recorders.Get().(*statusRecorder)
		rec.ResponseWriter, rec.code = w, 0
		defer func() {
			code := rec.code
			rec.ResponseWriter = nil
			recorders.Put(rec)
			if code == 0 {
				code = http.StatusOK
			}
			s.observe(routeLabel(r), methodLabel(r.Method), code, time.Since(start))
		}()
		next.ServeHTTP(rec, r)
	})
}
