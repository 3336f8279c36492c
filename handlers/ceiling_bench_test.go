package handlers

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/go-chi/chi/v5"
)

// BenchmarkBareChi is the ceiling server's handler, for comparison with
// BenchmarkHandlerCacheHit: the difference is what bigseg adds per request.
func BenchmarkBareChi(b *testing.B) {
	body := make([]byte, 205)
	r := chi.NewRouter()
	r.Get("/memberships/{contextKey}", func(w http.ResponseWriter, r *http.Request) {
		_ = chi.URLParam(r, "contextKey")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
	req := httptest.NewRequest(http.MethodGet, "/memberships/alice", nil)
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		r.ServeHTTP(w, req)
	}
}
