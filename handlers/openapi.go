package handlers

import (
	"net/http"

	"github.com/bigseg/bigseg/api"
)

// openAPI serves the API description.
func (s *server) openAPI() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(api.OpenAPI)
	}
}
