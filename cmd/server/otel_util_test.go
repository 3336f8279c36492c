package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/bigseg/bigseg/internal/otlptest"
	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
)

// What the OpenTelemetry tests expect of the instrumentation: OpenTelemetry's semantic
// conventions where the requirement names nothing of its own.
const (
	otelRouteAttr    = "http.route"                   // the chi route pattern
	otelURLPathAttr  = "url.path"                     // redacted: never the context key
	otelHTTPDuration = "http.server.request.duration" // the OTLP metric of every request
	otelServiceName  = "bigseg-otel-test"             // OTEL_SERVICE_NAME
	otelResource     = "deployment.environment.name=otel-test,team.name=segments"
)

// The secrets of the OpenTelemetry tests: distinctive, so that any of them found anywhere in
// what bigseg exported is a leak, whatever the attribute or encoding.
const (
	otelKeyMark     = "Wombat7Q"                     // in every context key the tests look up
	otelToken       = "tok-Kestrel9X-secret"         // BIGSEG_API_TOKENS, and AUTH on the Redis-protocol listener
	otelRedisPass   = "pw-Narwhal4V-secret"          // the Redis password, in BIGSEG_REDIS_URL
	otelCollectorID = "hdr-Ocelot3H-secret"          // OTEL_EXPORTER_OTLP_HEADERS: sent to the collector, never in telemetry
	otelAWSSecret   = "aws-Pangolin2K-secret"        // AWS_SECRET_ACCESS_KEY (moto accepts any)
	otelBaggage     = "tenant=otel-test,plan=gold;p" // a caller's baggage
	otelTracestate  = "vendor1=opaque-value"         // a caller's tracestate
)

// otelKey is the i-th context key of a test: with the mark, and with a /, a space and an @
// that the URL path escapes.
func otelKey(i int) string { return "user/" + otelKeyMark + " " + strconv.Itoa(i) + "@example.com" }

// The OTLP protocols bigseg is tested with.
var otelProtocols = []string{"grpc", "http/protobuf"}

// startReceiver runs an OTLP receiver (internal/otlptest) as a process of its own, this test
// binary re-executed (see TestMain), with the receiver's flags args; it is stopped when the
// test ends.
func startReceiver(t testing.TB, args ...string) *otlptest.Process {
	t.Helper()
	p, err := otlptest.StartProcess(execReceiver(args...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Logf("OTLP receiver: %v; stderr: %s", err, p.Stderr())
		}
	})
	return p
}

// execReceiver is the command of a receiver process with flags args.
func execReceiver(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{"BIGSEG_TEST_AS_OTLP_RECEIVER=1", "PATH=" + os.Getenv("PATH")}
	return cmd
}

// otelEndpoint is the receiver's endpoint for protocol, as OTEL_EXPORTER_OTLP_ENDPOINT takes it.
func otelEndpoint(r *otlptest.Process, protocol string) string {
	if protocol == "grpc" {
		return "http://" + r.GRPCAddr
	}
	return "http://" + r.HTTPAddr
}

// otelVars are the standard OTEL_* variables that export traces and metrics to endpoint over
// protocol, soon (batches every 100 ms, metrics every 500 ms), with the tests' service name,
// resource attributes and collector header, and kv on top.
func otelVars(endpoint, protocol string, kv ...string) map[string]string {
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
		"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp",
		"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "500",
		"OTEL_SERVICE_NAME": otelServiceName, "OTEL_RESOURCE_ATTRIBUTES": otelResource,
		"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20" + otelCollectorID,
	}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// otelRedis starts a Redis of the test's own that requires otelRedisPass, with every
// otelKey(i) for i < n included in seg-otel.g1 under bigseg's default prefix, and returns the
// BIGSEG_REDIS_URL that reaches it, the password in it.
func otelRedis(t *testing.T, n int) (*redistest.Server, string) {
	t.Helper()
	rs := redistest.Start(t, "--requirepass", otelRedisPass)
	c := goredis.NewClient(&goredis.Options{Addr: rs.Addr(), Password: otelRedisPass})
	defer c.Close()
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := range n {
		pipe.SAdd(ctx, "launchdarkly:big_segment_include:"+segments.Hash(otelKey(i)), "seg-otel.g1")
	}
	pipe.Set(ctx, "launchdarkly:big_segments_synchronized_on", strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return rs, "redis://default:" + otelRedisPass + "@" + rs.Addr()
}

// otelServerEnv is bigseg on redisURL with the tests' token, the Redis-protocol listener, a
// quick status poll, and the OTEL_* variables of otel on top.
func otelServerEnv(redisURL string, otel map[string]string) map[string]string {
	env := map[string]string{"BIGSEG_REDIS_URL": redisURL, "BIGSEG_API_TOKENS": otelToken, "BIGSEG_RESP_ADDR": "127.0.0.1:0",
		"BIGSEG_STATUS_POLL_INTERVAL": "200ms", "BIGSEG_LOG_LEVEL": "info"}
	for k, v := range otel {
		env[k] = v
	}
	return env
}

// traceparent is a caller's new W3C traceparent, sampled or not, with its trace and span ids.
func traceparent(sampled bool) (header, traceID, spanID string) {
	var b [24]byte
	rand.Read(b[:])
	traceID, spanID = hex.EncodeToString(b[:16]), hex.EncodeToString(b[16:])
	flags := "00"
	if sampled {
		flags = "01"
	}
	return "00-" + traceID + "-" + spanID + "-" + flags, traceID, spanID
}

// otelGet asks bigseg for path with the tests' token and the headers given as name/value
// pairs, and returns the status code and body; a transport error fails the test.
func otelGet(t *testing.T, client *http.Client, base, path string, headers ...string) (int, string) {
	t.Helper()
	return otelDo(t, client, http.MethodGet, base+path, "", headers...)
}

func otelDo(t *testing.T, client *http.Client, method, u, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+otelToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// keyPath is GET /memberships/{contextKey}'s path for key, escaped.
func keyPath(key string) string { return "/memberships/" + url.PathEscape(key) }

// waitReceived waits up to a minute (a loaded machine, exporters' batching) for cond over
// what r received.
func waitReceived(t *testing.T, r *otlptest.Process, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Wait(ctx, cond); err != nil {
		t.Fatalf("waited a minute for %s: %v; received %d spans, %d metrics over %d connections", what, err,
			len(r.Spans()), len(r.Metrics()), r.Connections(""))
	}
}

// spanSet is received spans, with the queries the tests need.
type spanSet []otlptest.Span

func (s spanSet) where(keep func(otlptest.Span) bool) spanSet {
	var out spanSet
	for _, sp := range s {
		if keep(sp) {
			out = append(out, sp)
		}
	}
	return out
}

func (s spanSet) inTrace(traceID string) spanSet {
	return s.where(func(sp otlptest.Span) bool { return otlptest.ID(sp.TraceId) == traceID })
}

func (s spanSet) ofKind(k tracepb.Span_SpanKind) spanSet {
	return s.where(func(sp otlptest.Span) bool { return sp.Kind == k })
}

func (s spanSet) byID(spanID []byte) (otlptest.Span, bool) {
	for _, sp := range s {
		if string(sp.SpanId) == string(spanID) {
			return sp, true
		}
	}
	return otlptest.Span{}, false
}

// beneath reports whether sp descends from (or is) ancestor, within s.
func (s spanSet) beneath(sp, ancestor otlptest.Span) bool {
	for range 64 {
		if string(sp.SpanId) == string(ancestor.SpanId) && string(sp.TraceId) == string(ancestor.TraceId) {
			return true
		}
		parent, ok := s.byID(sp.ParentSpanId)
		if len(sp.ParentSpanId) == 0 || !ok {
			return false
		}
		sp = parent
	}
	return false
}

// readsOf returns the store reads beneath span: its client spans.
func (s spanSet) readsOf(span otlptest.Span) spanSet {
	return s.where(func(sp otlptest.Span) bool { return sp.Kind == tracepb.Span_SPAN_KIND_CLIENT && s.beneath(sp, span) })
}

// names lists the spans' names and kinds, for failure messages.
func (s spanSet) names() string {
	var b strings.Builder
	for _, sp := range s {
		b.WriteString(sp.Kind.String() + " " + strconv.Quote(sp.Name) + " trace " + otlptest.ID(sp.TraceId)[:8] +
			" parent " + otlptest.ID(sp.ParentSpanId) + " links " + strconv.Itoa(len(sp.Links)) + "\n")
	}
	return b.String()
}

// checkNothingLeaked fails the test if any secret, in clear, URL-escaped, base64 or hex, is
// anywhere in what the receiver got: span names, attributes, events, links, resources,
// metrics' attributes. Something must have been received, or the check proves nothing.
func checkNothingLeaked(t *testing.T, r *otlptest.Process, secrets ...string) {
	t.Helper()
	payloads := r.Payloads()
	if payloads == "" {
		t.Fatal("nothing received: the privacy check would prove nothing")
	}
	for _, s := range secrets {
		forms := map[string]string{
			"clear": s, "URL-escaped": url.PathEscape(s), "query-escaped": url.QueryEscape(s),
			"base64": base64.StdEncoding.EncodeToString([]byte(s)), "base64url": base64.RawURLEncoding.EncodeToString([]byte(s)),
			"hex": hex.EncodeToString([]byte(s)),
		}
		for form, v := range forms {
			if i := strings.Index(payloads, v); i >= 0 {
				lo, hi := max(0, i-200), min(len(payloads), i+len(v)+200)
				t.Errorf("%q (%s) was exported: ...%s...", s, form, payloads[lo:hi])
			}
		}
	}
}
