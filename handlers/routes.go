package handlers

import "github.com/go-chi/chi/v5"

// routes lists every route of the API. api/openapi.yaml describes the same paths.
func (s *server) routes(r chi.Router) {
	// Each environment's lookups and status under its name; unscoped, the one's, if one. Flat,
	// in one router: a subrouter at /environments/{env} routes each request twice and joins its
	// pattern anew (13% more instructions per hot lookup, bench/instr -p).
	r.Group(s.lookupRoutes(""))
	r.Group(s.lookupRoutes("/environments/{env}"))
	r.Get("/environments/{env}/status", s.getStatus())

	// Operations: always open. GET routes answer HEAD too (see New).
	r.Get("/status", s.getStatus())
	s.opsRoutes(r)
	r.Get("/openapi.yaml", s.openAPI())
}

// lookupRoutes lists the routes about an environment under prefix, each behind the chain of
// its kind (Config): lookups and explains read the store, a batch reads its body and then the
// store (its Content-Type checked first), /segments answers from memory, the status stream is
// held open.
func (s *server) lookupRoutes(prefix string) func(chi.Router) {
	return func(r chi.Router) {
		r.With(s.Lookups).Get(prefix+"/memberships/{contextKey}", s.getMembership())
		r.With(s.Lookups).Get(prefix+"/memberships", s.getMembershipByHash())
		r.With(s.jsonBody, s.Batches).Post(prefix+"/memberships", s.postMemberships())
		r.With(s.Lookups).Get(prefix+"/memberships/{contextKey}/explain", s.getExplain())
		r.With(s.Lookups).Get(prefix+"/explain", s.getExplainByHash())
		r.With(s.Views).Get(prefix+"/segments", s.getSegments())
		r.With(s.Streams).Get(prefix+"/status/stream", s.getStatusStream())
	}
}

// opsRoutes lists the routes of the operations listener (NewOps), also on the API: for
// Prometheus and kubelets that cannot present the client certificate the API may require.
// NewOps adds Go's /debug/pprof, there only.
func (s *server) opsRoutes(r chi.Router) {
	r.Get("/livez", s.getLive())
	r.Get("/healthz", s.getLive())
	r.Get("/readyz", s.getReady())
	if s.Metrics != nil {
		r.Method("GET", "/metrics", s.Metrics)
	}
}
