package telemetry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/internal/otlptest"
)

// Setup's providers run goroutines (the batch span processor, the periodic reader, the
// exporters' connections): none may outlive Shutdown, beyond an export to a hung collector
// that its own timeout (TestHungCollector's 2 s) ends.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		err := goleak.Find()
		for deadline := time.Now().Add(10 * time.Second); err != nil && time.Now().Before(deadline); err = goleak.Find() {
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// setup is Setup with the variables set in the process environment, which OpenTelemetry's
// packages read, for the test.
func setup(t *testing.T, vars map[string]string, o Options) (*Telemetry, error) {
	for k, v := range vars {
		t.Setenv(k, v)
	}
	return Setup(context.Background(), o)
}

// lockedBuffer is a buffer written by the SDK's goroutines and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Nothing is exported, and nothing dialled, unless an exporter or an endpoint is set: the
// providers are nil, and no metric is registered.
func TestOffUnlessAnExporterOrEndpointIsSet(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"nothing":              {},
		"sampler only":         {"OTEL_TRACES_SAMPLER": "always_on", "OTEL_SERVICE_NAME": "x"},
		"none":                 {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
		"disabled":             {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"disabled, any case":   {"OTEL_SDK_DISABLED": "TRUE", "OTEL_METRICS_EXPORTER": "console"},
		"endpoint, but none":   {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
		"headers, no endpoint": {"OTEL_EXPORTER_OTLP_HEADERS": "api-key=secret"},
	} {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			tel, err := setup(t, vars, Options{Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			if tel.TracerProvider != nil || tel.MeterProvider != nil || tel.Propagator != nil || tel.HTTP() != nil {
				t.Errorf("providers %v %v %v, want none", tel.TracerProvider, tel.MeterProvider, tel.Propagator)
			}
			if n, _ := testutil.GatherAndCount(reg); n != 0 {
				t.Errorf("%d metrics registered, want none", n)
			}
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
}

// Which signals an endpoint turns on: the general one traces (metrics, which /metrics has,
// need OTEL_METRICS_EXPORTER), a signal's own that one.
func TestEndpointTurnsOnItsSignals(t *testing.T) {
	addr := "http://" + closedAddr(t)
	for _, tc := range []struct {
		vars            map[string]string
		traces, metrics bool
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": addr}, true, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": addr, "OTEL_METRICS_EXPORTER": "otlp"}, true, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": addr + "/v1/traces"}, true, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": addr + "/v1/metrics"}, false, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": addr, "OTEL_METRICS_EXPORTER": "none"}, true, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": addr}, true, false},
	} {
		t.Run(fmt.Sprint(tc.vars), func(t *testing.T) {
			tel, err := setup(t, tc.vars, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			defer tel.Shutdown(ctx)
			if (tel.TracerProvider != nil) != tc.traces || (tel.MeterProvider != nil) != tc.metrics {
				t.Errorf("traces %v, metrics %v; want %v, %v", tel.TracerProvider != nil, tel.MeterProvider != nil, tc.traces, tc.metrics)
			}
		})
	}
}

// A value the libraries refuse stops bigseg, with one error that says what is wrong.
func TestRefusedValues(t *testing.T) {
	endpoint := "http://" + closedAddr(t)
	for _, tc := range []struct {
		vars map[string]string
		want string // in the error, once
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}, "traces exporter"},
		{map[string]string{"OTEL_METRICS_EXPORTER": "otlp,console"}, "metrics exporter"},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_METRICS_EXPORTER": "otlp"}, "protocol"},
		{map[string]string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "udp", "OTEL_METRICS_EXPORTER": "otlp"}, "protocol"},
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team", "OTEL_TRACES_EXPORTER": "otlp"}, "OTEL_RESOURCE_ATTRIBUTES"},
	} {
		t.Run(fmt.Sprint(tc.vars), func(t *testing.T) {
			_, err := setup(t, tc.vars, Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			if n := strings.Count(err.Error(), tc.want); n != 1 {
				t.Errorf("error %q: %q %d times, want once", err, tc.want, n)
			}
		})
	}
}

// A value the SDK replaces by its default is logged, as a warning: a bad sampler or ratio.
func TestBadSamplerLogged(t *testing.T) {
	for _, vars := range []map[string]string{{"OTEL_TRACES_SAMPLER": "sometimes"}, {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}} {
		t.Run(fmt.Sprint(vars), func(t *testing.T) {
			var logs lockedBuffer
			vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://" + closedAddr(t)
			tel, err := setup(t, vars, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			tel.Shutdown(context.Background())
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "sampler") {
				t.Errorf("logs:\n%s", logs.String())
			}
		})
	}
}

// server is an API with the instrumentation, routed by chi as handlers routes it.
func server(tel *Telemetry) http.Handler {
	r := chi.NewRouter()
	r.Use(tel.HTTP())
	r.Get("/memberships/{contextKey}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("{}")) })
	return r
}

// Server spans and metrics, exported by OTLP to a real receiver: the sampler of
// OTEL_TRACES_SAMPLER decides (parentbased_always_off: a request without a traceparent is not
// traced, a caller's sampled trace is continued), the span is named by route pattern, url.path
// is the pattern, and neither the key of the path, nor the query, nor the Host a caller sent
// is anywhere in what is exported.
func TestHTTPExports(t *testing.T) {
	recv, err := otlptest.Start(otlptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	tel, err := setup(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + recv.HTTPAddr, "OTEL_METRICS_EXPORTER": "otlp",
		"OTEL_TRACES_SAMPLER": "parentbased_always_off"}, Options{Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	h := server(tel)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tp := range []string{"", "00-" + traceID + "-" + parentID + "-01"} {
		req := httptest.NewRequest("GET", "http://secret-host.example:1234/memberships/secret-key?contextHash=secret-hash", nil)
		if tp != "" {
			req.Header.Set("traceparent", tp)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := recv.Spans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want the sampled caller's one", len(spans))
	}
	sp := spans[0]
	if sp.Name != "GET /memberships/{contextKey}" || otlptest.ID(sp.TraceId) != traceID || otlptest.ID(sp.ParentSpanId) != parentID {
		t.Errorf("span %q in trace %s under %s", sp.Name, otlptest.ID(sp.TraceId), otlptest.ID(sp.ParentSpanId))
	}
	for key, want := range map[string]string{"url.path": "/memberships/{contextKey}", "http.route": "/memberships/{contextKey}", "server.address": ServiceName} {
		if got := otlptest.AttrString(sp.Attributes, key); got != want {
			t.Errorf("%s %q, want %q", key, got, want)
		}
	}
	if len(recv.Metrics()) == 0 {
		t.Error("no metric exported")
	}
	if p := recv.Payloads(); strings.Contains(p, "secret") {
		t.Errorf("the exports hold a secret:\n%s", p)
	}
}

// A collector that hangs holds no request, and Shutdown gives up on it at its context's end.
func TestHungCollector(t *testing.T) {
	recv, err := otlptest.Start(otlptest.Options{Fault: otlptest.Hang})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	tel, err := setup(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + recv.HTTPAddr, "OTEL_METRICS_EXPORTER": "otlp",
		"OTEL_BSP_SCHEDULE_DELAY": "1", "OTEL_METRIC_EXPORT_INTERVAL": "1", "OTEL_EXPORTER_OTLP_TIMEOUT": "2000"}, Options{Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	h := server(tel)
	for range 3000 { // many times the queue's 2048
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/memberships/k", nil)
		req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("%d", rec.Code)
		}
	}
	waitFor(t, func() bool { return len(recv.Exports(otlptest.Traces)) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	shut := make(chan struct{})
	go func() { _ = tel.Shutdown(ctx); close(shut) }()
	select { // a bound far past the context's, never met on time alone: it fails on a hang
	case <-shut:
	case <-time.After(10 * time.Second):
		t.Error("Shutdown still waiting for the hung collector 10 s after its context's 200ms")
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// A collector that is down, refuses (503) or answers garbage loses the spans of each export,
// counted; its failures are logged once, not once per export, and never with a header's value.
func TestCollectorFaultsAreLoggedOnce(t *testing.T) {
	for name, handler := range map[string]http.HandlerFunc{
		"refusing": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
		"garbage": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.Write([]byte("\xff\xff garbage"))
		},
		"down": nil,
	} {
		t.Run(name, func(t *testing.T) {
			url := "http://" + closedAddr(t)
			if handler != nil {
				srv := httptest.NewServer(handler)
				defer srv.Close()
				url = srv.URL
			}
			var logs lockedBuffer
			log, reg := slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry()
			tel, err := setup(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_METRICS_EXPORTER": "none",
				"OTEL_BSP_SCHEDULE_DELAY": "1", "OTEL_BSP_EXPORT_TIMEOUT": "300", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=hush-secret"}, Options{Log: log, Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			tracer := tel.TracerProvider.Tracer("test")
			for i := range 5 { // exported one by one, each failing
				_, s := tracer.Start(context.Background(), "a")
				s.End()
				waitFor(t, func() bool { return failed(reg) == float64(i+1) })
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = tel.Shutdown(ctx)
			if n := strings.Count(logs.String(), "OpenTelemetry"); n != 1 {
				t.Errorf("%d lines of failure, want 1:\n%s", n, logs.String())
			}
			if strings.Contains(logs.String(), "hush-secret") {
				t.Errorf("the logs show a header's value:\n%s", logs.String())
			}
		})
	}
}

func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Failures are logged at the first, then at most once a minute with their count, and once
// when exports succeed again.
func TestHealthLogsOncePerPeriod(t *testing.T) {
	var logs bytes.Buffer
	now := time.Unix(0, 0)
	h := &health{log: slog.New(slog.NewTextHandler(&logs, nil)), now: func() time.Time { return now }}
	h.ok()
	for range 100 {
		h.failed(io.ErrUnexpectedEOF)
		now = now.Add(time.Second)
	}
	h.ok()
	h.ok()
	h.failed(io.ErrUnexpectedEOF)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := []string{"OpenTelemetry failed", "still failing", "succeeded again", "OpenTelemetry failed"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s, want %q", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[1], "failuresSinceLastLog=60") || !strings.Contains(lines[2], "failuresSinceLastLog=39") {
		t.Errorf("counts:\n%s", logs.String())
	}
}

// The store clients' spans are made beneath a span being recorded only.
func TestChildrenOnly(t *testing.T) {
	if ChildrenOnly(nil) != nil {
		t.Error("ChildrenOnly(nil) is not nil")
	}
	tel, err := setup(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + closedAddr(t)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stores := ChildrenOnly(tel.TracerProvider).Tracer("store")
	ctx, root := stores.Start(context.Background(), "orphan")
	if root.IsRecording() || ctx != context.Background() {
		t.Error("a root span was made")
	}
	ctx, parent := tel.TracerProvider.Tracer("test").Start(context.Background(), "read")
	_, child := stores.Start(ctx, "redis.pipeline")
	if !child.IsRecording() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Error("no child beneath a recording span")
	}
	notSampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1}, SpanID: [8]byte{1}}))
	if _, s := stores.Start(notSampled, "x"); s.IsRecording() {
		t.Error("a span beneath one not sampled")
	}
	child.End()
	parent.End()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = tel.Shutdown(ctx) // the export fails: nothing listens
}

// failed is bigseg_otel_spans_export_failed_total in reg.
func failed(reg *prometheus.Registry) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "bigseg_otel_spans_export_failed_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// With a sampler that begins no trace of its own and no metric exported, a request that
// carries no trace context is not instrumented at all (its context holds no span, not even
// an unsampled one), while a caller's sampled trace is still continued, by whichever
// propagator OTEL_PROPAGATORS names.
func TestHTTPSkipsRequestsNoSamplerWouldTrace(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	w3c := []string{"traceparent", "00-" + traceID + "-00f067aa0ba902b7-01"}
	b3 := []string{"b3", traceID + "-00f067aa0ba902b7-1"}
	for _, tc := range []struct {
		vars   map[string]string
		caller []string // a sampled caller's header
		skips  bool
	}{
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}, w3c, true},
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_always_off"}, w3c, true},
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_always_off", "OTEL_PROPAGATORS": "b3"}, b3, true},
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.001"}, w3c, false},
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_always_on"}, w3c, false},
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_always_off", "OTEL_METRICS_EXPORTER": "otlp"}, w3c, false},
	} {
		t.Run(fmt.Sprint(tc.vars), func(t *testing.T) {
			tc.vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://" + closedAddr(t)
			tel, err := setup(t, tc.vars, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			defer tel.Shutdown(ctx)
			var seen trace.SpanContext
			h := tel.HTTP()(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = trace.SpanContextFromContext(r.Context())
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/memberships/k", nil))
			if seen.IsValid() == tc.skips {
				t.Errorf("a request without a trace context: span %v, want skipped %v", seen, tc.skips)
			}
			req := httptest.NewRequest("GET", "/memberships/k", nil)
			req.Header.Set(tc.caller[0], tc.caller[1])
			h.ServeHTTP(httptest.NewRecorder(), req)
			if !seen.IsSampled() || seen.TraceID().String() != traceID {
				t.Errorf("a sampled caller's request: span %v, want the caller's trace, sampled", seen)
			}
		})
	}
}
