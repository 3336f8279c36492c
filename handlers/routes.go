package handlers

import "github.com/go-chi/chi/v5"

// routes lists every route of the API. api/openapi.yaml describes the same paths.
func (s *server) routes(r chi.Router) {
	// The lookups and status of each environment, under its name; and, unscoped, those of
	// the one environment served, when there is only one.
	r.Group(s.lookupRoutes)
	r.Route("/environments/{env}", func(r chi.Router) {
		r.Group(s.lookupRoutes)
		r.Get("/status", s.getStatus())
	})

	// Operations: always open, never shed. GET routes answer HEAD too (see New).
	r.Get("/status", s.getStatus())
	s.opsRoutes(r)
	r.Get("/openapi.yaml", s.openAPI())
}

// lookupRoutes lists the lookups, and the status stream that holds a connection open: behind
// the bearer token check, so that strangers use no capacity. A batch's body is read, within its
// memory, then lookups take a slot once their input is read; streams take one of their own.
func (s *server) lookupRoutes(r chi.Router) {
	r.Use(s.authenticate)
	r.With(s.Shed).Get("/memberships/{contextKey}", s.getMembership())
	r.With(s.Shed).Get("/memberships", s.getMembershipByHash())
	r.With(s.jsonBody, s.Bodies.Limit(s.MaxBodyBytes, s.BodyReadTimeout, s.batchUses, Error), s.Shed).
		Post("/memberships", s.postMemberships())
	r.With(s.Streams).Get("/status/stream", s.getStatusStream())
}

// opsRoutes lists the routes of the operations listener (NewOps): metrics and the probes,
// the same as on the API, for Prometheus and for kubelets that cannot present the client
// certificate the API may require.
func (s *server) opsRoutes(r chi.Router) {
	r.Get("/livez", s.getLive())
	r.Get("/healthz", s.getLive())
	r.Get("/readyz", s.getReady())
	if s.Metrics != nil {
		r.Method("GET", "/metrics", s.Metrics)
	}
}
