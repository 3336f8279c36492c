package handlers

import "github.com/go-chi/chi/v5"

// routes lists every route of the API. api/openapi.yaml describes the same paths.
func (a *handler) routes(r chi.Router) {
	// Lookups: behind the bearer token check (WithAPITokens) and load shedding
	// (WithLoadShedding), in that order, so that strangers use no capacity.
	r.Group(func(r chi.Router) {
		if len(a.tokens) > 0 {
			r.Use(a.authenticate)
		}
		if a.shedder != nil {
			r.Use(a.shed)
		}
		r.Get("/memberships/{contextKey}", a.getMembership())
		r.Get("/memberships", a.getMembershipByHash())
		r.Post("/memberships", a.postMemberships())
	})

	// Operations: always open, never shed.
	r.Get("/status", a.getStatus())
	r.Get("/status/stream", a.getStatusStream())
	r.Get("/livez", a.getLive())
	r.Get("/healthz", a.getLive())
	r.Get("/readyz", a.getReady())
	if a.metrics != nil {
		r.Method("GET", "/metrics", a.metrics)
	}
	r.Get("/openapi.yaml", a.openAPI())
}
