package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/bigseg/bigseg/segments"
)

// receiver is an OTLP/HTTP collector that keeps what it is sent.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string][][]byte // by path: /v1/traces, /v1/metrics
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{bodies: map[string][][]byte{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies[req.URL.Path] = append(r.bodies[req.URL.Path], b)
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) all(path string) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[path]
}

// End to end, with traces and metrics exported by OTLP to a collector: a request's server
// span continues the caller's trace, with its lookup and read beneath; a Redis-protocol
// command is a span; bigseg's metrics and http.server.request.duration arrive, flushed at
// shutdown; and nothing exported, in any byte, holds the context key, its hash or the token.
func TestOTLPExportHasNoSecrets(t *testing.T) { // not parallel: t.Setenv
	rcv := newReceiver(t)
	for k, v := range map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_METRICS_EXPORTER": "otlp",
		"OTEL_BSP_SCHEDULE_DELAY": "3600000", "OTEL_METRIC_EXPORT_INTERVAL": "3600000"} { // all exported at shutdown
		t.Setenv(k, v)
	}
	const key, token = "secret.person@example.com", "t0ken-very-secret"
	hash := segments.Hash(key)
	srv := start(t, withRESP(map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json", "BIGSEG_API_TOKENS": token}))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest("GET", srv.URL+"/memberships/"+url.PathEscape(key)+"?contextHash="+url.QueryEscape(hash), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	req.Header.Set("baggage", "user="+url.QueryEscape(key))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rc := respClient(t, respAddr(t, srv.logs), goredis.Options{Password: token})
	if err := rc.SMembers(context.Background(), "launchdarkly:big_segment_include:"+hash).Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	spans := map[string]string{} // name -> trace ID
	for _, b := range rcv.all("/v1/traces") {
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name] = string(s.TraceId)
				}
			}
		}
	}
	for _, name := range []string{"GET /memberships/{contextKey}", "SMEMBERS", "AUTH"} {
		if _, ok := spans[name]; !ok {
			t.Errorf("no %s span among %v", name, spans)
		}
	}
	if spans["GET /memberships/{contextKey}"] != string(mustHex(t, traceID)) {
		t.Error("the request's trace is not the caller's")
	}
	metrics := bytes.Join(rcv.all("/v1/metrics"), nil)
	for _, name := range []string{"http.server.request.duration", "bigseg_http_requests_total", "bigseg_build_info"} {
		if !bytes.Contains(metrics, []byte(name)) {
			t.Errorf("the metrics exported have no %s", name)
		}
	}
	everything := bytes.Join(append(rcv.all("/v1/traces"), rcv.all("/v1/metrics")...), nil)
	for _, secret := range []string{key, url.PathEscape(key), url.QueryEscape(key), hash, url.QueryEscape(hash), token} {
		if bytes.Contains(everything, []byte(secret)) {
			t.Errorf("an export holds %q", secret)
		}
	}
	if strings.Contains(srv.logs.all(), token) {
		t.Error("the logs hold the token")
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b := make([]byte, len(s)/2)
	for i := range b {
		var v byte
		for _, c := range s[2*i : 2*i+2] {
			v <<= 4
			switch {
			case '0' <= c && c <= '9':
				v |= byte(c - '0')
			default:
				v |= byte(c-'a') + 10
			}
		}
		b[i] = v
	}
	return b
}

// A protocol OpenTelemetry does not have stops the server with one error, printed once,
// however many signals would use it.
func TestOTelBadProtocolRefusedOnce(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{"BIGSEG_TEST_AS_SERVER=1", "BIGSEG_ADDR=127.0.0.1:0", "BIGSEG_SEED_FILE=../../examples/memberships.json",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/json", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_METRICS_EXPORTER=otlp"}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("started with an unknown protocol:\n%s", out)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(strings.ToLower(lines[0]), "protocol") {
		t.Errorf("%d lines printed, want the protocol's error once:\n%s", len(lines), out)
	}
}
