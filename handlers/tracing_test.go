package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/telemetry"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
)

// traced is a server with OpenTelemetry, whose spans and metrics the test reads.
type traced struct {
	url    string
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newTraced(t *testing.T, sampler sdktrace.Sampler) traced {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithSampler(sampler))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	store := memoryStore(t, map[string]fixture.Context{"secret-key": {Included: []string{"seg"}}})
	srv := newServer(t, store, handlers.Config{Trace: (&telemetry.Telemetry{TracerProvider: tp, MeterProvider: mp}).HTTP()})
	return traced{url: srv.URL, spans: spans, reader: reader}
}

// A server span for every request, named by method and route pattern (the method alone for a
// request of no route), kind server, with the route as url.path: never the path requested,
// which holds a context key, nor the query, which may hold a hash.
func TestServerSpans(t *testing.T) {
	tr := newTraced(t, sdktrace.AlwaysSample())
	hash := segments.Hash("secret-key")
	escaped := strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D").Replace(hash)
	for _, tc := range []struct {
		method, path, body string
		name, route        string
		code               int64
	}{
		{"GET", "/memberships/secret-key?debug=secret-key", "", "GET /memberships/{contextKey}", "/memberships/{contextKey}", 200},
		{"GET", "/environments/default/memberships/secret-key", "", "GET /environments/{env}/memberships/{contextKey}", "/environments/{env}/memberships/{contextKey}", 200},
		{"GET", "/memberships?contextHash=" + escaped, "", "GET /memberships", "/memberships", 200},
		{"POST", "/memberships", `{"contextKeys":["secret-key"],"contextHashes":["` + hash + `"]}`, "POST /memberships", "/memberships", 200},
		{"GET", "/nothing/secret-key", "", "GET", "", 404},
		{"GET", "/memberships/secret-key/more", "", "GET", "", 404},
		{"FOO", "/memberships/secret-key", "", "HTTP", "", 405},
		{"GET", "/status", "", "GET /status", "/status", 200},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			tr.spans.Reset()
			req, _ := http.NewRequest(tc.method, tr.url+tc.path, strings.NewReader(tc.body))
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			req.Header.Set("Baggage", "user=secret-key")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			var server sdktrace.ReadOnlySpan
			for _, s := range tr.spans.Ended() {
				if s.SpanKind() == trace.SpanKindServer {
					server = s
				}
				noSecrets(t, s, "secret-key", hash, escaped)
			}
			if server == nil {
				t.Fatalf("no server span among %d", len(tr.spans.Ended()))
			}
			if server.Name() != tc.name {
				t.Errorf("span %q, want %q", server.Name(), tc.name)
			}
			attrs := attributes(server.Attributes())
			if attrs["http.route"] != tc.route || tc.route != "" && attrs["url.path"] != tc.route {
				t.Errorf("route %q, path %q; want %q", attrs["http.route"], attrs["url.path"], tc.route)
			}
			if attrs["http.response.status_code"] != attribute.Int64Value(tc.code).Emit() {
				t.Errorf("status code %s, want %d", attrs["http.response.status_code"], tc.code)
			}
		})
	}
}

// attributes are the values of attrs by key, as strings.
func attributes(attrs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, a := range attrs {
		m[string(a.Key)] = a.Value.Emit()
	}
	return m
}

// noSecrets fails if any of secrets is in the span's name, attributes, events or links.
func noSecrets(t *testing.T, s sdktrace.ReadOnlySpan, secrets ...string) {
	t.Helper()
	texts := []string{s.Name(), s.Status().Description}
	for _, a := range s.Attributes() {
		texts = append(texts, string(a.Key)+"="+a.Value.Emit())
	}
	for _, e := range s.Events() {
		texts = append(texts, e.Name)
		for _, a := range e.Attributes {
			texts = append(texts, string(a.Key)+"="+a.Value.Emit())
		}
	}
	for _, l := range s.Links() {
		for _, a := range l.Attributes {
			texts = append(texts, string(a.Key)+"="+a.Value.Emit())
		}
	}
	for _, text := range texts {
		for _, secret := range secrets {
			if secret != "" && strings.Contains(text, secret) {
				t.Errorf("span %q holds %q: %s", s.Name(), secret, text)
			}
		}
	}
}

// The caller's trace continues: a sampled traceparent makes bigseg's span its child, one not
// sampled makes none (parent-based sampling), whatever the root sampler.
func TestTraceContextContinues(t *testing.T) {
	tr := newTraced(t, sdktrace.ParentBased(sdktrace.NeverSample()))
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		flags string
		spans int
	}{{"01", 1}, {"00", 0}} {
		tr.spans.Reset()
		req, _ := http.NewRequest("GET", tr.url+"/memberships/k", nil)
		req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-"+tc.flags)
		req.Header.Set("tracestate", "vendor=x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var server []sdktrace.ReadOnlySpan
		for _, s := range tr.spans.Ended() {
			if s.SpanKind() == trace.SpanKindServer {
				server = append(server, s)
			}
		}
		if len(server) != tc.spans {
			t.Fatalf("flags %s: %d server spans, want %d", tc.flags, len(server), tc.spans)
		}
		if tc.spans == 0 {
			continue
		}
		s := server[0]
		if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != parentID || !s.Parent().IsRemote() {
			t.Errorf("span %v, parent %v: not the caller's trace", s.SpanContext(), s.Parent())
		}
		if s.SpanContext().TraceState().Get("vendor") != "x" {
			t.Error("tracestate not continued")
		}
	}
}

// http.server.request.duration, from the same instrumentation as the spans, by route pattern,
// method and status code only.
func TestRequestDurationMetric(t *testing.T) {
	tr := newTraced(t, sdktrace.NeverSample())
	for _, path := range []string{"/memberships/secret-key", "/memberships/other-key", "/nothing/secret-key"} {
		resp, _ := get(t, tr.url+path)
		resp.Body.Close()
	}
	var rm metricdata.ResourceMetrics
	if err := tr.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "http.server.request.duration" || m.Unit != "s" {
				continue
			}
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				attrs := attributes(p.Attributes.ToSlice())
				for _, v := range attrs {
					if strings.Contains(v, "secret-key") {
						t.Errorf("a point's attributes hold the key: %v", attrs)
					}
				}
				counts[attrs["http.request.method"]+" "+attrs["http.route"]+" "+attrs["http.response.status_code"]] += p.Count
			}
		}
	}
	want := map[string]uint64{"GET /memberships/{contextKey} 200": 2, "GET  404": 1}
	if len(counts) != len(want) || counts["GET /memberships/{contextKey} 200"] != 2 || counts["GET  404"] != 1 {
		t.Errorf("points %v, want %v", counts, want)
	}
}
