package handlers

import "github.com/go-chi/chi/v5"

// routes lists every route of the API. api/openapi.yaml describes the same paths.
func (s *server) routes(r chi.Router) {
	// Lookups, and the status stream that holds a connection open: behind the bearer token
	// check (WithAPITokens), so that strangers use no capacity. Lookups then take a slot
	// (WithLoadShedding) once their input is read and checked; streams one of their own.
	r.Group(func(r chi.Router) {
		if s.tokens.Enabled() {
			r.Use(s.tokens.Require(refuse))
		}
		r.Get("/memberships/{contextKey}", s.getMembership())
		r.Get("/memberships", s.getMembershipByHash())
		r.Post("/memberships", s.postMemberships())
		r.Get("/status/stream", s.getStatusStream())
	})

	// Operations: always open, never shed. GET routes answer HEAD too (see New).
	r.Get("/status", s.getStatus())
	r.Get("/livez", s.getLive())
	r.Get("/healthz", s.getLive())
	r.Get("/readyz", s.getReady())
	if s.metrics != nil {
		r.Method("GET", "/metrics", s.metrics)
	}
	r.Get("/openapi.yaml", s.openAPI())
}

// opsRoutes lists the routes of the operations listener (NewOps): metrics and the probes,
// the same as on the API, for Prometheus and for kubelets that cannot present the client
// certificate the API may require.
func (s *server) opsRoutes(r chi.Router) {
	r.Get("/livez", s.getLive())
	r.Get("/healthz", s.getLive())
	r.Get("/readyz", s.getReady())
	if s.metrics != nil {
		r.Method("GET", "/metrics", s.metrics)
	}
}
