package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) {
	if os.Getenv("OTLPTEST_AS_RECEIVER") == "1" { // this test binary as the receiver's program
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// traces is an export of one span named name.
func traces(name string) *coltracepb.ExportTraceServiceRequest {
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "test")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "scope"}, Spans: []*tracepb.Span{{
			TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), Name: name,
			Kind: tracepb.Span_SPAN_KIND_SERVER, Attributes: []*commonpb.KeyValue{str("http.route", "/x/{y}")},
		}}}},
	}}}
}

// metrics is an export of one gauge named name.
func metrics(name string) *colmetricspb.ExportMetricsServiceRequest {
	return &colmetricspb.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "test")}},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{Name: name, Data: &metricspb.Metric_Gauge{
			Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsInt{AsInt: 3}}}},
		}}}}},
	}}}
}

func start(t *testing.T, opts Options) *Receiver {
	t.Helper()
	r, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func wait(t *testing.T, r *Received, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Wait(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// post sends msg to an HTTP receiver's path, as protobuf or JSON, gzip-encoded or not.
func post(t *testing.T, client *http.Client, url string, msg proto.Message, asJSON, gz bool) (*http.Response, error) {
	t.Helper()
	var body []byte
	var err error
	if asJSON {
		body, err = protojson.Marshal(msg)
	} else {
		body, err = proto.Marshal(msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		zw.Close()
		body = b.Bytes()
	}
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", map[bool]string{true: "application/json", false: "application/x-protobuf"}[asJSON])
	req.Header.Set("Authorization", "Bearer collector-token")
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	return client.Do(req)
}

// TestHTTP: traces and metrics over HTTP, as protobuf or JSON, gzip-encoded or not, are
// decoded, kept with their headers and answered with an empty response.
func TestHTTP(t *testing.T) {
	for _, tc := range []struct {
		name       string
		asJSON, gz bool
	}{{"protobuf", false, false}, {"protobuf gzip", false, true}, {"json", true, false}, {"json gzip", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, Options{})
			for _, path := range []string{"/v1/traces", "/v1/metrics"} {
				msg := map[string]proto.Message{"/v1/traces": traces("GET /x/{y}"), "/v1/metrics": metrics("m")}[path]
				resp, err := post(t, http.DefaultClient, "http://"+r.HTTPAddr+path, msg, tc.asJSON, tc.gz)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("%s: %s", path, resp.Status)
				}
			}
			spans, ms := r.Spans(), r.Metrics()
			if len(spans) != 1 || spans[0].Name != "GET /x/{y}" || AttrString(spans[0].Attributes, "http.route") != "/x/{y}" ||
				AttrString(spans[0].Resource.Attributes, "service.name") != "test" || spans[0].Scope.GetName() != "scope" {
				t.Errorf("spans: %v", spans)
			}
			if len(ms) != 1 || ms[0].Name != "m" {
				t.Errorf("metrics: %v", ms)
			}
			for _, rec := range r.Exports("") {
				if rec.Listener != "http" || rec.Headers["authorization"][0] != "Bearer collector-token" {
					t.Errorf("record %+v", rec)
				}
				if want := map[bool]string{true: "gzip"}[tc.gz]; rec.Encoding != want {
					t.Errorf("encoding %q, want %q", rec.Encoding, want)
				}
			}
			if got := r.Connections("http"); got != 1 {
				t.Errorf("%d HTTP connections, want 1 (keep-alive)", got)
			}
		})
	}
}

func grpcClient(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestGRPC: traces and metrics over gRPC, compressed or not, are decoded and kept with their
// metadata.
func TestGRPC(t *testing.T) {
	r := start(t, Options{})
	cc := grpcClient(t, r.GRPCAddr)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer collector-token")
	if _, err := coltracepb.NewTraceServiceClient(cc).Export(ctx, traces("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := coltracepb.NewTraceServiceClient(cc).Export(ctx, traces("b"), grpc.UseCompressor(grpcgzip.Name)); err != nil {
		t.Fatal(err)
	}
	if _, err := colmetricspb.NewMetricsServiceClient(cc).Export(ctx, metrics("m")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range r.Spans() {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"a", "b"}, names); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	if ms := r.Metrics(); len(ms) != 1 || ms[0].Name != "m" {
		t.Errorf("metrics: %v", ms)
	}
	for _, rec := range r.Exports("") {
		if rec.Listener != "grpc" || len(rec.Headers["authorization"]) != 1 || rec.Headers["authorization"][0] != "Bearer collector-token" {
			t.Errorf("record %+v", rec)
		}
	}
	if got := r.Connections("grpc"); got != 1 {
		t.Errorf("%d gRPC connections, want 1", got)
	}
}

// TestFaults: each fault is answered as it says, over both protocols, and the export is
// recorded all the same.
func TestFaults(t *testing.T) {
	client := &http.Client{Timeout: 500 * time.Millisecond}
	t.Run("unavailable", func(t *testing.T) {
		r := start(t, Options{Fault: Unavailable})
		resp, err := post(t, client, "http://"+r.HTTPAddr+"/v1/traces", traces("a"), false, false)
		if err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("HTTP: %v %v", resp, err)
		}
		_, err = coltracepb.NewTraceServiceClient(grpcClient(t, r.GRPCAddr)).Export(context.Background(), traces("b"))
		if status.Code(err) != codes.Unavailable {
			t.Errorf("gRPC: %v, want UNAVAILABLE", err)
		}
		if n := len(r.Exports(Traces)); n != 2 || r.Exports(Traces)[0].Fault != "unavailable" {
			t.Errorf("%d exports recorded, want 2 marked unavailable: %+v", n, r.Exports(Traces))
		}
	})
	t.Run("hang", func(t *testing.T) {
		r := start(t, Options{Fault: Hang})
		if _, err := post(t, client, "http://"+r.HTTPAddr+"/v1/traces", traces("a"), false, false); !isTimeout(err) {
			t.Errorf("HTTP: %v, want a timeout", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := coltracepb.NewTraceServiceClient(grpcClient(t, r.GRPCAddr)).Export(ctx, traces("b"))
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("gRPC: %v, want DEADLINE_EXCEEDED", err)
		}
		wait(t, r.Received, "both exports recorded", func() bool { return len(r.Exports(Traces)) == 2 })
	})
	t.Run("slow", func(t *testing.T) {
		r := start(t, Options{Delay: 300 * time.Millisecond})
		began := time.Now()
		resp, err := post(t, http.DefaultClient, "http://"+r.HTTPAddr+"/v1/traces", traces("a"), false, false)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("HTTP: %v %v", resp, err)
		}
		if took := time.Since(began); took < 300*time.Millisecond { // a lower bound: never flaky
			t.Errorf("answered after %v, before the delay", took)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		r := start(t, Options{Fault: Garbage})
		resp, err := post(t, client, "http://"+r.HTTPAddr+"/v1/traces", traces("a"), false, false)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || proto.Unmarshal(body, &coltracepb.ExportTraceServiceResponse{}) == nil {
			t.Errorf("HTTP: %s, a body that decodes", resp.Status)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = coltracepb.NewTraceServiceClient(grpcClient(t, r.GRPCAddr)).Export(ctx, traces("b"))
		if err == nil {
			t.Error("gRPC: the export succeeded against garbage")
		}
		if r.Connections("grpc") == 0 {
			t.Error("no gRPC connection recorded")
		}
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestProcess runs the receiver as a process (this test binary, as Main) and reads back what it
// received; closing its standard input ends it.
func TestProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-fault", "ok")
	cmd.Env = append(os.Environ(), "OTLPTEST_AS_RECEIVER=1")
	p, err := StartProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	resp, err := post(t, http.DefaultClient, "http://"+p.HTTPAddr+"/v1/traces", traces("over http"), false, true)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HTTP: %v %v", resp, err)
	}
	if _, err := coltracepb.NewTraceServiceClient(grpcClient(t, p.GRPCAddr)).Export(context.Background(), traces("over grpc")); err != nil {
		t.Fatal(err)
	}
	wait(t, p.Received, "two spans", func() bool { return len(p.Spans()) == 2 })
	if got := p.Payloads(); !strings.Contains(got, "over http") || !strings.Contains(got, "over grpc") || strings.Contains(got, "collector-token") {
		t.Errorf("payloads: %s", got)
	}
	if p.Connections("") != 2 {
		t.Errorf("%d connections, want 2", p.Connections(""))
	}
	if err := p.Stop(); err != nil {
		t.Errorf("stop: %v (stderr: %s)", err, p.Stderr())
	}
}

// TestParseFault: every name, and a wrong one.
func TestParseFault(t *testing.T) {
	for in, want := range map[string]Fault{"": OK, "ok": OK, "unavailable": Unavailable, "hang": Hang, "garbage": Garbage} {
		if got, err := ParseFault(in); err != nil || got != want {
			t.Errorf("ParseFault(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFault("teapot"); err == nil {
		t.Error("ParseFault(teapot): no error")
	}
}
