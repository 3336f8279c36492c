package main

// The OpenTelemetry tests: the real program as a process, exporting to an OTLP receiver
// (internal/otlptest) that is a process of its own, configured by nothing but the standard
// OTEL_* variables.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/bigseg/bigseg/internal/otlptest"
	"github.com/bigseg/bigseg/segments"
)

// otelShutdownTimeout is BIGSEG_WRITE_TIMEOUT in these tests (the shutdown's bound), and otelExitBound the bound
// the process must exit within after SIGTERM: the timeout (within which the exporters flush),
// plus a generous slack for a loaded machine and the race detector.
const (
	otelShutdownTimeout = 4 * time.Second // more than a lookup, its body and its wait for a slot
	otelExitBound       = otelShutdownTimeout + 20*time.Second
)

// TestOTelHTTPLookup: a lookup over HTTP is a server span named by its chi route, continuing
// the caller's traceparent (same trace, the caller's span its parent; tracestate and baggage
// accepted), with the store read as a client span beneath it; a cached answer reads nothing;
// every route is named by its pattern; the resource carries
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; exports arrive over the protocol asked for,
// with OTEL_EXPORTER_OTLP_HEADERS; and no key, token or password is anywhere in them.
func TestOTelHTTPLookup(t *testing.T) {
	t.Parallel()
	for _, protocol := range otelProtocols {
		t.Run(protocol, func(t *testing.T) {
			recv := startReceiver(t)
			_, redisURL := otelRedis(t, 4)
			p := startProcess(t, otelServerEnv(redisURL, otelVars(otelEndpoint(recv, protocol), protocol)))
			client := &http.Client{Timeout: 10 * time.Second}
			defer client.CloseIdleConnections()

			type call struct{ path, route, traceID, parentID string }
			var calls []call
			for _, c := range []struct{ path, route string }{
				{keyPath(otelKey(0)), "/memberships/{contextKey}"},
				{keyPath(otelKey(0)), "/memberships/{contextKey}"}, // answered from the cache
				{"/environments/default" + keyPath(otelKey(1)), "/environments/{env}/memberships/{contextKey}"},
				{"/memberships?contextHash=" + segments.Hash(otelKey(2)), "/memberships"},
			} {
				tp, traceID, parentID := traceparent(true)
				code, body := otelGet(t, client, p.URL, c.path, "traceparent", tp, "tracestate", otelTracestate, "baggage", otelBaggage)
				if code != 200 || !strings.Contains(body, "seg-otel.g1") {
					t.Fatalf("GET %s: %d %s", c.path, code, body)
				}
				calls = append(calls, call{c.path, c.route, traceID, parentID})
			}
			waitReceived(t, recv, "a server span in every caller's trace, and a store read in each uncached one's", func() bool {
				for i, c := range calls {
					tr := spanSet(recv.Spans()).inTrace(c.traceID)
					if len(tr.ofKind(tracepb.Span_SPAN_KIND_SERVER)) == 0 || i != 1 && len(tr.ofKind(tracepb.Span_SPAN_KIND_CLIENT)) == 0 {
						return false
					}
				}
				return true
			})
			spans := spanSet(recv.Spans())
			for i, c := range calls {
				checkHTTPTrace(t, spans, c.path, c.route, c.traceID, c.parentID, i == 1)
			}
			checkResource(t, spanSet(recv.Spans()))
			checkExportsCame(t, recv, protocol)
			checkNothingLeaked(t, recv, otelKeyMark, otelKey(0), otelKey(1), otelKey(2), otelToken, otelRedisPass, otelCollectorID)
		})
	}
}

// checkHTTPTrace checks the trace of one GET: its server span, and the store read beneath it.
func checkHTTPTrace(t *testing.T, spans spanSet, path, route, traceID, parentID string, cached bool) {
	t.Helper()
	trace := spans.inTrace(traceID)
	servers := trace.ofKind(tracepb.Span_SPAN_KIND_SERVER)
	if len(servers) != 1 {
		t.Errorf("GET %s: %d server spans in the caller's trace, want 1:\n%s", path, len(servers), trace.names())
		return
	}
	srv := servers[0]
	if got := otlptest.ID(srv.ParentSpanId); got != parentID {
		t.Errorf("GET %s: the server span's parent is %q, want the caller's span %s", path, got, parentID)
	}
	if want := "GET " + route; srv.Name != want {
		t.Errorf("GET %s: the server span is named %q, want %q", path, srv.Name, want)
	}
	if got := otlptest.AttrString(srv.Attributes, otelRouteAttr); got != route {
		t.Errorf("GET %s: %s=%q, want the pattern %q", path, otelRouteAttr, got, route)
	}
	if got := otlptest.AttrString(srv.Attributes, otelURLPathAttr); strings.Contains(got, otelKeyMark) || strings.Contains(got, "contextHash=") {
		t.Errorf("GET %s: %s=%q is not redacted", path, otelURLPathAttr, got)
	}
	if got := otlptest.AttrString(srv.Attributes, "http.response.status_code"); got != "200" {
		t.Errorf("GET %s: http.response.status_code=%q, want 200", path, got)
	}
	reads := spans.readsOf(srv)
	switch {
	case cached && len(reads) > 0:
		t.Errorf("GET %s: answered from the cache, yet %d store reads:\n%s", path, len(reads), reads.names())
	case !cached && len(reads) == 0:
		t.Errorf("GET %s: no store read (a client span beneath the server span):\n%s", path, trace.names())
	}
}

// checkResource: every span's resource carries the service name and attributes of
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func checkResource(t *testing.T, spans spanSet) {
	t.Helper()
	for _, sp := range spans {
		attrs := sp.Resource.GetAttributes()
		if got := otlptest.AttrString(attrs, "service.name"); got != otelServiceName {
			t.Errorf("span %q: service.name=%q, want OTEL_SERVICE_NAME's %q", sp.Name, got, otelServiceName)
			return
		}
		for pair := range strings.SplitSeq(otelResource, ",") {
			k, v, _ := strings.Cut(pair, "=")
			if got := otlptest.AttrString(attrs, k); got != v {
				t.Errorf("span %q: resource %s=%q, want OTEL_RESOURCE_ATTRIBUTES's %q", sp.Name, k, got, v)
				return
			}
		}
	}
}

// checkExportsCame: every export came over the listener of protocol, with the header of
// OTEL_EXPORTER_OTLP_HEADERS.
func checkExportsCame(t *testing.T, recv *otlptest.Process, protocol string) {
	t.Helper()
	want := map[string]string{"grpc": "grpc", "http/protobuf": "http"}[protocol]
	for _, rec := range recv.Exports("") {
		if rec.Listener != want {
			t.Errorf("a %s export came over %s, want %s", rec.Signal, rec.Listener, want)
		}
		if got := rec.Headers["authorization"]; len(got) != 1 || got[0] != "Bearer "+otelCollectorID {
			t.Errorf("a %s export's authorization header is %q, want OTEL_EXPORTER_OTLP_HEADERS's", rec.Signal, got)
		}
		if protocol == "http/protobuf" && !strings.HasPrefix(strings.Join(rec.Headers["content-type"], ""), "application/x-protobuf") {
			t.Errorf("a %s export over http/protobuf has Content-Type %q", rec.Signal, rec.Headers["content-type"])
		}
	}
}

// TestOTelRESPLookup: each command on the Redis-protocol listener is a server span named by the
// command alone (never its key), and a membership read has the store read beneath it; the AUTH
// token is nowhere in what is exported.
func TestOTelRESPLookup(t *testing.T) {
	t.Parallel()
	for _, protocol := range otelProtocols {
		t.Run(protocol, func(t *testing.T) {
			recv := startReceiver(t)
			_, redisURL := otelRedis(t, 2)
			p := startProcess(t, otelServerEnv(redisURL, otelVars(otelEndpoint(recv, protocol), protocol)))
			rc := respClient(t, respAddr(t, p.logs), goredis.Options{Password: otelToken, Protocol: 2})
			ctx := context.Background()
			k := respKeys{prefix: "launchdarkly"}
			if got, err := rc.SMembers(ctx, k.include(otelKey(0))).Result(); err != nil || len(got) != 1 || got[0] != "seg-otel.g1" {
				t.Fatalf("SMEMBERS: %v, %v", got, err)
			}
			if _, err := rc.Get(ctx, k.synchronizedOn()).Result(); err != nil {
				t.Fatalf("GET: %v", err)
			}
			commandSpan := func(cmd string) spanSet {
				return spanSet(recv.Spans()).ofKind(tracepb.Span_SPAN_KIND_SERVER).where(func(sp otlptest.Span) bool {
					return otlptest.AttrString(sp.Attributes, otelRouteAttr) == "" && strings.Contains(strings.ToUpper(sp.Name), cmd)
				})
			}
			waitReceived(t, recv, "server spans of SMEMBERS and GET", func() bool {
				return len(commandSpan("SMEMBERS")) > 0 && len(commandSpan("GET")) > 0
			})
			spans := spanSet(recv.Spans())
			for _, sp := range spans.ofKind(tracepb.Span_SPAN_KIND_SERVER) {
				if strings.Contains(sp.Name, ":") || strings.Contains(sp.Name, "launchdarkly") || strings.Contains(sp.Name, segments.Hash(otelKey(0))) {
					t.Errorf("server span %q names a key", sp.Name)
				}
			}
			waitReceived(t, recv, "the store read beneath SMEMBERS", func() bool {
				return len(spanSet(recv.Spans()).readsOf(commandSpan("SMEMBERS")[0])) > 0
			})
			checkNothingLeaked(t, recv, otelKeyMark, otelKey(0), otelToken, otelRedisPass, otelCollectorID)
		})
	}
}

// TestOTelSampler: with OTEL_TRACES_SAMPLER=parentbased_traceidratio and an _ARG of 0, nothing
// is exported but the traces whose caller sampled them: neither requests without a
// traceparent, nor those whose traceparent is not sampled, nor the status poll's reads.
func TestOTelSampler(t *testing.T) {
	t.Parallel()
	recv := startReceiver(t)
	_, redisURL := otelRedis(t, 8)
	p := startProcess(t, otelServerEnv(redisURL, otelVars(otelEndpoint(recv, "http/protobuf"), "http/protobuf",
		"OTEL_TRACES_SAMPLER", "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG", "0",
		"BIGSEG_WRITE_TIMEOUT", otelShutdownTimeout.String())))
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for i := range 3 {
		if code, body := otelGet(t, client, p.URL, keyPath(otelKey(i))); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		tp, _, _ := traceparent(false)
		if code, body := otelGet(t, client, p.URL, keyPath(otelKey(3+i)), "traceparent", tp); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	tp, traceID, parentID := traceparent(true)
	if code, body := otelGet(t, client, p.URL, keyPath(otelKey(7)), "traceparent", tp); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	waitReceived(t, recv, "the sampled caller's server span", func() bool {
		return len(spanSet(recv.Spans()).inTrace(traceID).ofKind(tracepb.Span_SPAN_KIND_SERVER)) > 0
	})
	p.signal(t, syscall.SIGTERM) // everything ended before is flushed now
	if err := p.wait(t, otelExitBound); err != nil {
		t.Fatalf("exit: %v", err)
	}
	spans := spanSet(recv.Spans())
	if other := spans.where(func(sp otlptest.Span) bool { return otlptest.ID(sp.TraceId) != traceID }); len(other) > 0 {
		t.Errorf("%d spans exported outside the one sampled trace:\n%s", len(other), other.names())
	}
	if srv := spans.inTrace(traceID).ofKind(tracepb.Span_SPAN_KIND_SERVER); otlptest.ID(srv[0].ParentSpanId) != parentID {
		t.Errorf("the sampled trace's server span has parent %s, want %s", otlptest.ID(srv[0].ParentSpanId), parentID)
	}
}

// TestOTelBatchRead: a batch is one server span with its one store read beneath it.
func TestOTelBatchRead(t *testing.T) {
	t.Parallel()
	recv := startReceiver(t)
	_, redisURL := otelRedis(t, 3)
	p := startProcess(t, otelServerEnv(redisURL, otelVars(otelEndpoint(recv, "grpc"), "grpc")))
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	tp, traceID, _ := traceparent(true)
	keys := []string{otelKey(0), otelKey(1), otelKey(2)}
	body, _ := json.Marshal(map[string][]string{"contextKeys": keys})
	if code, answer := otelDo(t, client, http.MethodPost, p.URL+"/memberships", string(body), "traceparent", tp); code != 200 {
		t.Fatalf("batch: %d %s", code, answer)
	}
	waitReceived(t, recv, "the batch's server span and its read", func() bool {
		tr := spanSet(recv.Spans()).inTrace(traceID)
		return len(tr.ofKind(tracepb.Span_SPAN_KIND_SERVER)) > 0 && len(tr.readsOf(tr.ofKind(tracepb.Span_SPAN_KIND_SERVER)[0])) > 0
	})
	tr := spanSet(recv.Spans()).inTrace(traceID)
	srv := tr.ofKind(tracepb.Span_SPAN_KIND_SERVER)[0]
	if srv.Name != "POST /memberships" || otlptest.AttrString(srv.Attributes, otelRouteAttr) != "/memberships" {
		t.Errorf("the batch's server span: %q, route %q", srv.Name, otlptest.AttrString(srv.Attributes, otelRouteAttr))
	}
	if reads := tr.readsOf(srv); len(reads) != 1 {
		t.Errorf("the batch of %d contexts has %d store reads beneath its server span, want 1:\n%s", len(keys), len(reads), tr.names())
	}
}

// TestOTelNothingDialled: without an exporter or an endpoint (only a service name, say), with
// OTEL_SDK_DISABLED=true, and with both exporters "none", bigseg connects to no collector: not
// to the default endpoints (localhost:4317 and 4318), nor to one configured.
func TestOTelNothingDialled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		defaults bool // the receiver on the default ports, and no endpoint given
		env      func(endpoint string) map[string]string
	}{
		{"nothing set", true, func(string) map[string]string { return map[string]string{"OTEL_SERVICE_NAME": otelServiceName} }},
		{"SDK disabled", false, func(ep string) map[string]string {
			return otelVars(ep, "http/protobuf", "OTEL_SDK_DISABLED", "true")
		}},
		{"exporters none", false, func(ep string) map[string]string {
			return otelVars(ep, "http/protobuf", "OTEL_TRACES_EXPORTER", "none", "OTEL_METRICS_EXPORTER", "none")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recv *otlptest.Process
			if tc.defaults {
				recv = defaultPortsReceiver(t)
			} else {
				recv = startReceiver(t)
			}
			_, redisURL := otelRedis(t, 2)
			env := otelServerEnv(redisURL, tc.env(otelEndpoint(recv, "http/protobuf")))
			env["BIGSEG_WRITE_TIMEOUT"] = otelShutdownTimeout.String()
			p := startProcess(t, env)
			client := &http.Client{Timeout: 10 * time.Second}
			defer client.CloseIdleConnections()
			for i := range 2 {
				tp, _, _ := traceparent(true)
				if code, body := otelGet(t, client, p.URL, keyPath(otelKey(i)), "traceparent", tp); code != 200 {
					t.Fatalf("%d %s", code, body)
				}
			}
			p.signal(t, syscall.SIGTERM) // a shutdown flushes: whatever was to be sent is sent by its end
			if err := p.wait(t, otelExitBound); err != nil {
				t.Fatalf("exit: %v", err)
			}
			if n := recv.Connections(""); n > 0 {
				t.Errorf("the collector was dialled %d times", n)
			}
		})
	}
}

// defaultPortsReceiver is a receiver on OpenTelemetry's default ports (4317, 4318) on the
// loopback; the test is skipped if another process holds them.
func defaultPortsReceiver(t *testing.T) *otlptest.Process {
	t.Helper()
	r, err := func() (*otlptest.Process, error) {
		cmd := execReceiver("-grpc", "127.0.0.1:4317", "-http", "127.0.0.1:4318")
		return otlptest.StartProcess(cmd)
	}()
	if err != nil {
		t.Skipf("the default OTLP ports are taken: %v", err)
	}
	t.Cleanup(func() { r.Stop() })
	return r
}
