package handlers

import "github.com/go-chi/chi/v5"

// routes lists every route of the API. api/openapi.yaml describes the same paths.
func (a *handler) routes(r chi.Router) {
	r.Get("/memberships/{contextKey}", a.getMembership())
	r.Get("/memberships", a.getMembershipByHash())
	r.Post("/memberships", a.postMemberships())

	r.Get("/status", a.getStatus())
	r.Get("/status/stream", a.getStatusStream())
	r.Get("/livez", a.getLive())
	r.Get("/healthz", a.getLive())
	r.Get("/readyz", a.getReady())

	r.Get("/openapi.yaml", a.openAPI())
	if a.metrics != nil {
		r.Method("GET", "/metrics", a.metrics)
	}
}
