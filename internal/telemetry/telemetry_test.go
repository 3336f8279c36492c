package telemetry

import (
	"bytes"
	"context"
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

// Setup's providers run goroutines (the batch span processor, the periodic reader, the
// exporters' connections): none may outlive Shutdown.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// env is a getenv of the given variables only.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// setenv sets the variables for the exporters, which read the process environment, and
// returns a getenv of them.
func setenv(t *testing.T, vars map[string]string) func(string) string {
	for k, v := range vars {
		t.Setenv(k, v)
	}
	return os.Getenv
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
			tel, err := Setup(context.Background(), env(vars), Options{Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			if tel.TracerProvider != nil || tel.MeterProvider != nil || tel.Propagator != nil {
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
	for _, tc := range []struct {
		vars            map[string]string
		traces, metrics string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "otlp", "none"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "otlp"}, "otlp", "otlp"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, "otlp", "none"},
		{map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, "none", "otlp"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"}, "otlp", "none"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, "console", "none"},
	} {
		s, err := readSettings(env(tc.vars))
		if err != nil {
			t.Fatal(err)
		}
		if s.traces != tc.traces || s.metrics != tc.metrics {
			t.Errorf("%v: traces %s, metrics %s; want %s, %s", tc.vars, s.traces, s.metrics, tc.traces, tc.metrics)
		}
	}
}

// A bad value stops bigseg with an error naming the variable, and never quoting a value
// (headers carry API keys).
func TestBadValuesAreRefused(t *testing.T) {
	dir := t.TempDir()
	notPEM := dir + "/not.pem"
	if err := os.WriteFile(notPEM, []byte("secret-not-a-cert"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, value string }{
		{"OTEL_SDK_DISABLED", "yes"},
		{"OTEL_TRACES_EXPORTER", "jaeger"},
		{"OTEL_TRACES_EXPORTER", "otlp,console"},
		{"OTEL_METRICS_EXPORTER", "prometheus"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "udp"},
		{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpcs"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://c/secret"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization Bearer secret"},
		{"OTEL_EXPORTER_OTLP_METRICS_HEADERS", "api-key=secret%zz"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "bad key=secret"},
		{"OTEL_EXPORTER_OTLP_CERTIFICATE", dir + "/missing.pem"},
		{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", notPEM},
		{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", notPEM},
		{"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"},
		{"OTEL_TRACES_SAMPLER", "sometimes"},
		{"OTEL_TRACES_SAMPLER_ARG", "1.5"},
		{"OTEL_TRACES_SAMPLER_ARG", "half"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "0"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-1"},
		{"OTEL_BSP_SCHEDULE_DELAY", "5s"},
		{"OTEL_BSP_EXPORT_TIMEOUT", "-5"},
		{"OTEL_METRIC_EXPORT_INTERVAL", "1m"},
		{"OTEL_RESOURCE_ATTRIBUTES", "team"},
		// What a hostile round found accepted: a queue made whole at start (2^31 spans ran the
		// process out of memory), NaN, a header no request may carry, zero durations, and
		// resource attributes sent with every export whatever their size.
		{"OTEL_BSP_MAX_QUEUE_SIZE", "2147483647"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "100001"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100001"},
		{"OTEL_TRACES_SAMPLER_ARG", "NaN"},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "a=secret\nx"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "a=secret%0Dx"},
		{"OTEL_METRIC_EXPORT_INTERVAL", "0"},
		{"OTEL_BSP_EXPORT_TIMEOUT", "0"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "0"},
		{"OTEL_RESOURCE_ATTRIBUTES", "team=" + strings.Repeat("x", 4096)},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			_, err := Setup(context.Background(), env(map[string]string{tc.name: tc.value}), Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), tc.name+": ") {
				t.Errorf("error %q does not begin with the variable", err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q quotes the value", err)
			}
		})
	}
	_, err := Setup(context.Background(), env(map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "20"}), Options{})
	if err == nil || !strings.Contains(err.Error(), "OTEL_BSP_MAX_EXPORT_BATCH_SIZE") {
		t.Errorf("a batch larger than the queue: %v", err)
	}
}

// Good values pass, every one at once.
func TestGoodValuesAreAccepted(t *testing.T) {
	vars := map[string]string{
		"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
		"OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b,x-team=bigseg", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
		"OTEL_EXPORTER_OTLP_TIMEOUT": "2000", "OTEL_TRACES_SAMPLER": "ParentBased_TraceIDRatio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
		"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100", "OTEL_BSP_SCHEDULE_DELAY": "100",
		"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=prod,team=a%2Cb",
	}
	s, err := readSettings(env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if s.tracesProtocol != protocolGRPC || s.metricsProtocol != protocolHTTP || s.queueSize != 100 || s.batchDelay != 100*time.Millisecond {
		t.Errorf("settings %+v", s)
	}
	if got := s.sampler.Description(); got != "ParentBased{root:TraceIDRatioBased{0.25},remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler,localParentSampled:AlwaysOnSampler,localParentNotSampled:AlwaysOffSampler}" {
		t.Errorf("sampler %s", got)
	}
}

// The console exporter writes the spans, with service.name bigseg by default, and the
// metrics of the registry bridged, at Shutdown at the latest.
func TestConsoleExporters(t *testing.T) {
	var out lockedBuffer
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "bigseg_test_lookups_total", Help: "lookups"})
	reg.MustRegister(c)
	c.Add(3)
	tel, err := Setup(context.Background(), setenv(t, map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console"}),
		Options{Registry: reg, Version: "v1.2.3", Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.TracerProvider.Tracer("test").Start(context.Background(), "GET /memberships/{contextKey}")
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Name":"GET /memberships/{contextKey}"`, `"Value":"bigseg"`, `"Value":"v1.2.3"`, `"Name":"bigseg_test_lookups_total"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console output lacks %s:\n%s", want, out.String())
		}
	}
}

// A span that finds the queue full is dropped and counted, exactly, and lookups never wait
// for the exporter, however slow.
func TestDroppedSpansAreCounted(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	reg := prometheus.NewRegistry()
	tel, err := Setup(context.Background(), setenv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": hung.URL, "OTEL_METRICS_EXPORTER": "none",
		"OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10", "OTEL_BSP_SCHEDULE_DELAY": "1"}), Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	tracer := tel.TracerProvider.Tracer("test")
	for range 10 { // the first export takes them all, and hangs
		_, s := tracer.Start(context.Background(), "a")
		s.End()
	}
	waitFor(t, func() bool { return tel.spansQueued.Load() == 0 })
	for range 25 { // 10 queued, 15 dropped
		_, s := tracer.Start(context.Background(), "b")
		s.End()
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP bigseg_otel_spans_dropped_total Spans dropped unexported because the export queue (OTEL_BSP_MAX_QUEUE_SIZE) was full: the collector is slow or down.
# TYPE bigseg_otel_spans_dropped_total counter
bigseg_otel_spans_dropped_total 15
`), "bigseg_otel_spans_dropped_total"); err != nil {
		t.Error(err)
	}
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
// counted; its failures are logged once, not once per export; a success afterwards is logged once.
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
			tel, err := Setup(context.Background(), setenv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_METRICS_EXPORTER": "none",
				"OTEL_BSP_SCHEDULE_DELAY": "1", "OTEL_BSP_EXPORT_TIMEOUT": "300", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=hush-secret"}), Options{Log: log, Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			tracer := tel.TracerProvider.Tracer("test")
			for range 5 { // exported one by one, each failing
				_, s := tracer.Start(context.Background(), "a")
				s.End()
				waitFor(t, func() bool { return tel.spansQueued.Load() == 0 })
			}
			waitFor(t, func() bool { return strings.Contains(logs.String(), "OpenTelemetry export failed") })
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = tel.Shutdown(ctx)
			if n := strings.Count(logs.String(), "OpenTelemetry export"); n != 1 {
				t.Errorf("%d lines of failure, want 1:\n%s", n, logs.String())
			}
			if strings.Contains(logs.String(), "hush-secret") {
				t.Errorf("the logs show a header's value:\n%s", logs.String())
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP bigseg_otel_spans_export_failed_total Spans lost in exports that failed: the collector refused them, answered garbage, or did not answer in time.
# TYPE bigseg_otel_spans_export_failed_total counter
bigseg_otel_spans_export_failed_total 5
`), "bigseg_otel_spans_export_failed_total"); err != nil {
				t.Error(err)
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
	want := []string{"export failed", "still failing", "succeeded again", "export failed"}
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
	var out lockedBuffer
	tel, err := Setup(context.Background(), env(map[string]string{"OTEL_TRACES_EXPORTER": "console"}), Options{Stdout: &out})
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
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// With a sampler that begins no trace of its own, a request without a traceparent is not
// traced at all (no extraction, no unsampled span: its context holds no span), while a
// caller's sampled trace is still continued.
func TestHTTPSkipsRequestsNoSamplerWouldTrace(t *testing.T) {
	for _, tc := range []struct {
		sampler, arg string
		skips        bool
	}{
		{"parentbased_traceidratio", "0", true},
		{"parentbased_always_off", "", true},
		{"parentbased_traceidratio", "1", false},
		{"parentbased_always_on", "", false},
	} {
		t.Run(tc.sampler+"="+tc.arg, func(t *testing.T) {
			vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + closedAddr(t), "OTEL_TRACES_SAMPLER": tc.sampler}
			if tc.arg != "" {
				vars["OTEL_TRACES_SAMPLER_ARG"] = tc.arg
			}
			tel, err := Setup(context.Background(), env(vars), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			var seen trace.SpanContext
			h := tel.HTTP()(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = trace.SpanContextFromContext(r.Context())
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/memberships/k", nil))
			if seen.IsValid() == tc.skips {
				t.Errorf("a request without a traceparent: span %v, want skipped %v", seen, tc.skips)
			}
			req := httptest.NewRequest("GET", "/memberships/k", nil)
			req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			h.ServeHTTP(httptest.NewRecorder(), req)
			if !seen.IsSampled() || seen.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Errorf("a sampled caller's request: span %v, want the caller's trace, sampled", seen)
			}
		})
	}
}
