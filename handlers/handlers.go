// Package handlers is bigseg's HTTP API: chi routes over the segments service. routes.go lists
// every route, as api/openapi.yaml does (a test keeps them equal), and which kind each is:
// a lookup, a batch, a view or a stream. The defences kept under hostile clients (tokens, body
// memory, stream slots) are middleware chains in Config, one per kind, which
// cmd/server composes (from packages auth and limit): the handlers put each kind's chain on its
// routes and never know which limits exist.
package handlers

import (
	"cmp"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/bigseg/bigseg/api"
	"github.com/bigseg/bigseg/segments"
)

// Service is what the handlers ask of the domain beside each environment's; *segments.Service is one.
type Service interface {
	Environments() []*segments.Environment
	Changes() <-chan struct{}
	Readiness() (ready bool, reason string)
	Draining() bool
	StaleAfter() time.Duration
}

var _ Service = (*segments.Service)(nil)

// Defaults of Config's request limits and streams, for the fields left zero.
const (
	DefaultMaxKeyBytes        = 1024
	DefaultMaxBatch           = 1000
	DefaultMaxBatchRefs       = 100_000
	DefaultMaxBodyBytes       = 1 << 20
	DefaultBodyReadTimeout    = 2 * time.Second // for Config.Batches' body reads, which cmd/server composes
	DefaultHeartbeat          = 15 * time.Second
	DefaultStreamWriteTimeout = 5 * time.Second
)

// Config is what the handlers are given; the zero value of a field means its default, or
// none for the middleware.
type Config struct {
	Log        *slog.Logger // where request problems are logged; default: discarded
	StoreName  string       // named in /status ("redis", "dynamodb" or "embedded")
	StoreTable string       // the DynamoDB table, named in /status; "" for other stores
	Version    string       // named in /status

	MaxKeyBytes  int   // longest context key accepted
	MaxBatch     int   // most lookups in one POST /memberships
	MaxBatchRefs int   // most segment refs in one batch answer (400 beyond)
	MaxBodyBytes int64 // largest batch body read here, when Batches has not read it (413 beyond)

	Heartbeat          time.Duration   // how often an idle status stream sends a comment
	StreamWriteTimeout time.Duration   // bound of each write of a status stream
	Stop               <-chan struct{} // closed at shutdown: open status streams end

	Observe RequestObserver // told about every request answered (metrics); each is logged at debug level too
	Metrics http.Handler    // served at /metrics when set

	// The defences, one chain for each kind of route that routes.go names, composed by
	// cmd/server; nil means none. Refusals are best written with Error. The environment a
	// request is about, for a token check, is Scope's.
	Lookups func(http.Handler) http.Handler // lookups that read the store, their input in the URL
	Batches func(http.Handler) http.Handler // POST /memberships: may read its body whole (a Bytes method on r.Body), then reads the store
	Views   func(http.Handler) http.Handler // what only the environment's callers may see, answered from memory (/segments)
	Streams func(http.Handler) http.Handler // status streams, held open
	Trace   func(http.Handler) http.Handler // OpenTelemetry's spans and request durations (telemetry.HTTP), outermost

	// Authorized says whether r carries credentials that open env: /status shows a store's
	// details only then, and a status stream ends once they no longer do (a revoked token).
	// nil: everyone is.
	Authorized func(r *http.Request, env string) bool
}

// RequestObserver is told about every request once answered: route (a chi pattern, or
// "unmatched") and method (a standard one, or "other") come from fixed sets, whatever is sent.
type RequestObserver func(route, method string, code int, d time.Duration)

// server is what the handlers read.
type server struct {
	svc    Service
	envs   []*segments.Environment
	byName map[string]*segments.Environment
	Config
	scope func(*http.Request) string // Scope of the environments served
	mux   *chi.Mux
}

// New returns the HTTP API over the service's environments: each under /environments/{env}/,
// and the one environment, when there is only one, at the unscoped routes too.
func New(cfg Config, svc Service) http.Handler {
	s := newServer(cfg, svc)
	s.routes(s.mux)
	return s.mux
}

// NewOps returns the handler of a listener for operations only: /metrics (Config.Metrics),
// the probes (/livez, /healthz, /readyz) and Go's /debug/pprof, which the API never serves.
// pprof's handlers are outside the API's middleware: a profile's answer takes as long as it
// asks for, and a symbol lookup is a POST with a body.
func NewOps(cfg Config, svc Service) http.Handler {
	s := newServer(cfg, svc)
	s.opsRoutes(s.mux)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", s.mux)
	return mux
}

func newServer(cfg Config, svc Service) *server {
	s := &server{svc: svc, envs: svc.Environments(), byName: make(map[string]*segments.Environment), Config: cfg, mux: chi.NewRouter()}
	for _, e := range s.envs {
		s.byName[e.Name] = e
	}
	s.scope = Scope(segments.Names(s.envs)...)
	s.setDefaults()
	s.Observe = s.logRequests(s.Observe)
	if s.Trace != nil {
		s.mux.Use(s.Trace) // outermost, as observed
	}
	s.mux.Use(s.observed) // outermost but for the trace: it sees the 500 of a recovered panic
	s.mux.Use(s.noBodies, s.closeWhenDraining, s.recoverer, middleware.GetHead)
	s.mux.NotFound(s.notFound)
	s.mux.MethodNotAllowed(s.methodNotAllowed)
	return s
}

func (s *server) setDefaults() {
	orDefault(&s.MaxKeyBytes, DefaultMaxKeyBytes)
	orDefault(&s.MaxBatch, DefaultMaxBatch)
	orDefault(&s.MaxBatchRefs, DefaultMaxBatchRefs)
	orDefault(&s.MaxBodyBytes, DefaultMaxBodyBytes)
	orDefault(&s.Heartbeat, DefaultHeartbeat)
	orDefault(&s.StreamWriteTimeout, DefaultStreamWriteTimeout)
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	for _, chain := range []*func(http.Handler) http.Handler{&s.Lookups, &s.Batches, &s.Views, &s.Streams} {
		if *chain == nil {
			*chain = func(next http.Handler) http.Handler { return next }
		}
	}
	if s.Authorized == nil {
		s.Authorized = func(*http.Request, string) bool { return true }
	}
}

func orDefault[T int | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Error writes {"error": msg} with code: the one way errors are written, the defences' too.
// Unless it is a 400 whose input was read whole, the connection closes after it, so that a
// client turned away queues again like everyone else, and a body not read is cut off, not read
// slowly.
func Error(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if _, read := r.Body.(interface{ Bytes() []byte }); code != http.StatusBadRequest || r.ContentLength != 0 && !read {
		w.Header().Set("Connection", "close")
		if r.ContentLength != 0 && !read {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	}
	writeJSON(w, code, map[string]string{"error": msg})
}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/memberships/") {
		Error(w, r, http.StatusNotFound, "context key is empty: GET /memberships/{contextKey}")
		return
	}
	Error(w, r, http.StatusNotFound, "no such route: see /openapi.yaml")
}

// methodNotAllowed answers OPTIONS with 204 and Allow, another method with 405 and Allow, and,
// on a path of no route (chi sends it methods it does not know on any path), 404.
func (s *server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	path := cmp.Or(r.URL.RawPath, r.URL.Path)
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if s.mux.Match(chi.NewRouteContext(), m, path) {
			w.Header().Add("Allow", m)
			if m == http.MethodGet {
				w.Header().Add("Allow", http.MethodHead)
			}
		}
	}
	if len(w.Header()["Allow"]) == 0 {
		s.notFound(w, r)
		return
	}
	w.Header().Add("Allow", http.MethodOptions)
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	Error(w, r, http.StatusMethodNotAllowed, "method "+methodLabel(r.Method)+" is not allowed here")
}

// openAPI serves the API description.
func (s *server) openAPI() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = io.WriteString(w, api.OpenAPI)
	}
}
