package handlers

import "github.com/go-chi/chi/v5"

// routes lists every route of the API. api/openapi.yaml describes the same paths.
func (a *handler) routes(r chi.Router) {
	// Lookups, and the status stream that holds a connection open: behind the bearer token
	// check (WithAPITokens), so that strangers use no capacity. Lookups then take a slot
	// (WithLoadShedding) once their input is read and checked; streams one of their own.
	r.Group(func(r chi.Router) {
		if len(a.tokens) > 0 {
			r.Use(a.authenticate)
		}
		r.Get("/memberships/{contextKey}", a.getMembership())
		r.Get("/memberships", a.getMembershipByHash())
		r.Post("/memberships", a.postMemberships())
		r.Get("/status/stream", a.getStatusStream())
	})

	// Operations: always open, never shed. GET routes answer HEAD too (see New).
	r.Get("/status", a.getStatus())
	r.Get("/livez", a.getLive())
	r.Get("/healthz", a.getLive())
	r.Get("/readyz", a.getReady())
	if a.metrics != nil {
		r.Method("GET", "/metrics", a.metrics)
	}
	r.Get("/openapi.yaml", a.openAPI())
}
