package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkHTTPNotSampled is a request the sampler does not trace (no traceparent,
// parentbased_always_off), traces otherwise on: what the instrumentation costs it.
func BenchmarkHTTPNotSampled(b *testing.B) {
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	b.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_off")
	tel, err := Setup(context.Background(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	h := server(tel)
	req := httptest.NewRequest(http.MethodGet, "/memberships/k", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}
