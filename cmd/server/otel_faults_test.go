package main

// The OpenTelemetry tests of a collector that fails, of the shutdown's flush and the OTLP
// metrics, and of DynamoDB's reads.

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/internal/otlptest"
	"github.com/bigseg/bigseg/segments"
)

// otelDropsMetric is how the metric that counts the telemetry a failing collector costs is
// recognised among bigseg's Prometheus metrics: its name is bigseg's own.
var otelDropsMetric = regexp.MustCompile(`^bigseg_\w*(otel|telemetry|span|export)\w*(drop|lost|fail)\w*$|^bigseg_\w*(drop|lost)\w*(otel|telemetry|span|export)\w*$`)

// TestOTelCollectorFaults: with the collector down, hanging, slow (past the export timeout),
// answering 503 or UNAVAILABLE, or answering garbage, over both protocols, lookups under load
// keep succeeding (every one answered, none failed); the telemetry lost is counted in a
// metric; the failure is logged once for its period, not per export; and SIGTERM ends the
// process within the shutdown bound.
func TestOTelCollectorFaults(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a load test: not in -short runs")
	}
	for _, fault := range []struct {
		name string
		args []string // the receiver's flags; nil: a receiver killed before bigseg starts
	}{
		{"down", nil},
		{"hang", []string{"-fault", "hang"}},
		{"slow", []string{"-delay", "30s"}},
		{"unavailable", []string{"-fault", "unavailable"}},
		{"garbage", []string{"-fault", "garbage"}},
	} {
		for _, protocol := range otelProtocols {
			t.Run(fault.name+"/"+protocol, func(t *testing.T) {
				t.Parallel()
				recv := startReceiver(t, fault.args...)
				if fault.args == nil {
					recv.Kill() // its ports are closed now: connections are refused
				}
				_, redisURL := otelRedis(t, 50)
				p := startProcess(t, otelServerEnv(redisURL, otelVars(otelEndpoint(recv, protocol), protocol,
					"OTEL_EXPORTER_OTLP_TIMEOUT", "1000", "OTEL_BSP_EXPORT_TIMEOUT", "1000", "OTEL_BSP_MAX_QUEUE_SIZE", "64",
					"OTEL_METRIC_EXPORT_TIMEOUT", "1000",
					"BIGSEG_CACHE_SIZE", "0", "BIGSEG_WRITE_TIMEOUT", otelShutdownTimeout.String())))
				// 400 lookups, a few spans each: many times the 64 the exporter may queue.
				ok, failed, failure := otelLoad(p.URL, 8, 50)
				if failed > 0 || ok != 8*50 {
					t.Errorf("%d of %d lookups answered, %d failed, e.g. %s", ok, 8*50, failed, failure)
				}
				waitDropsCounted(t, p.URL)
				lines := otelFailureLines(p)
				for deadline := time.Now().Add(30 * time.Second); len(lines) == 0 && time.Now().Before(deadline); lines = otelFailureLines(p) {
					time.Sleep(100 * time.Millisecond) // polling a condition: an export times out after its second
				}
				if len(lines) == 0 || len(lines) > 4 {
					t.Errorf("%d log lines of the collector's failure over one failure period, want 1 to 4 (one per signal and period):\n%s",
						len(lines), strings.Join(lines, "\n"))
				}
				p.signal(t, syscall.SIGTERM)
				if err := p.wait(t, otelExitBound); err != nil {
					t.Errorf("exit: %v; logs:\n%s", err, p.logs.all())
				}
			})
		}
	}
}

// otelLoad runs clients that each look up n contexts (the seeded 50, in turn, with a sampled
// traceparent), and returns how many were answered 200 with the seeded membership, how many
// were not, and one failure.
func otelLoad(base string, clients, n int) (ok, failed int64, failure string) {
	var okN, failedN atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second}
			defer client.CloseIdleConnections()
			for i := range n {
				req, _ := http.NewRequest(http.MethodGet, base+keyPath(otelKey((c*n+i)%50)), nil)
				tp, _, _ := traceparent(true)
				req.Header.Set("Authorization", "Bearer "+otelToken)
				req.Header.Set("traceparent", tp)
				resp, err := client.Do(req)
				if err != nil {
					failedN.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(string(body), `"seg-otel.g1":true`) {
					failedN.Add(1)
					firstFailure.CompareAndSwap(nil, resp.Status+" "+string(body))
					continue
				}
				okN.Add(1)
			}
		})
	}
	wg.Wait()
	failure, _ = firstFailure.Load().(string)
	return okN.Load(), failedN.Load(), failure
}

// waitDropsCounted waits up to a minute for bigseg's metric of lost telemetry to count some.
func waitDropsCounted(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var names []string
	for {
		names = names[:0]
		for name, f := range scrapeFamilies(t, newGoodClient(base), base) {
			if otelDropsMetric.MatchString(name) {
				names = append(names, name)
				if (&dto{f}).value() > 0 {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("after a minute, no metric of lost telemetry counts any (metrics like it: %v)", names)
			return
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
}

// otelFailureLines are the warnings and errors the process logged about exporting.
func otelFailureLines(p *process) []string {
	var out []string
	for line := range strings.Lines(p.logs.all()) {
		l := strings.ToLower(line)
		if (strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`)) &&
			(strings.Contains(l, "otel") || strings.Contains(l, "telemetry") || strings.Contains(l, "export") || strings.Contains(l, "collector")) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// TestOTelShutdownFlushesAndMetrics: with batches and metric exports far apart, what was
// recorded before SIGTERM is exported by the shutdown, within its bound: the lookup's spans,
// http.server.request.duration (by route pattern) and a bridged bigseg metric, on the
// resource of OTEL_SERVICE_NAME, and no key in any of it.
func TestOTelShutdownFlushesAndMetrics(t *testing.T) {
	t.Parallel()
	for _, protocol := range otelProtocols {
		t.Run(protocol, func(t *testing.T) {
			recv := startReceiver(t)
			_, redisURL := otelRedis(t, 1)
			p := startProcess(t, otelServerEnv(redisURL, otelVars(otelEndpoint(recv, protocol), protocol,
				"OTEL_BSP_SCHEDULE_DELAY", "600000", "OTEL_METRIC_EXPORT_INTERVAL", "600000",
				"BIGSEG_WRITE_TIMEOUT", otelShutdownTimeout.String())))
			client := &http.Client{Timeout: 10 * time.Second}
			tp, traceID, _ := traceparent(true)
			if code, body := otelGet(t, client, p.URL, keyPath(otelKey(0)), "traceparent", tp); code != 200 {
				t.Fatalf("%d %s", code, body)
			}
			client.CloseIdleConnections()
			p.signal(t, syscall.SIGTERM)
			if err := p.wait(t, otelExitBound); err != nil {
				t.Fatalf("exit: %v", err)
			}
			waitReceived(t, recv, "the lookup's server span, flushed at shutdown", func() bool {
				return len(spanSet(recv.Spans()).inTrace(traceID).ofKind(tracepb.Span_SPAN_KIND_SERVER)) > 0
			})
			waitReceived(t, recv, otelHTTPDuration+" and a bigseg metric, flushed at shutdown", func() bool {
				return len(metricsNamed(recv, otelHTTPDuration)) > 0 && len(metricsNamed(recv, "bigseg_")) > 0
			})
			checkDurationMetric(t, metricsNamed(recv, otelHTTPDuration))
			for _, m := range recv.Metrics() {
				if got := otlptest.AttrString(m.Resource.GetAttributes(), "service.name"); got != otelServiceName {
					t.Errorf("metric %s: service.name=%q, want %q", m.Name, got, otelServiceName)
					break
				}
			}
			checkExportsCame(t, recv, protocol)
			checkNothingLeaked(t, recv, otelKeyMark, otelKey(0), otelToken, otelRedisPass, otelCollectorID)
		})
	}
}

// metricsNamed returns the received metrics whose name is name, or starts with it if it ends
// in _.
func metricsNamed(recv *otlptest.Process, name string) []otlptest.Metric {
	var out []otlptest.Metric
	for _, m := range recv.Metrics() {
		if m.Name == name || strings.HasSuffix(name, "_") && strings.HasPrefix(m.Name, name) {
			out = append(out, m)
		}
	}
	return out
}

// checkDurationMetric: http.server.request.duration is a histogram, in seconds, with a point
// for the lookup's route pattern, none for a path.
func checkDurationMetric(t *testing.T, ms []otlptest.Metric) {
	t.Helper()
	routes := map[string]bool{}
	for _, m := range ms {
		h, isHistogram := m.Data.(*metricspb.Metric_Histogram)
		if !isHistogram || m.Unit != "s" {
			t.Errorf("%s: %T in %q, want a histogram in s", m.Name, m.Data, m.Unit)
			continue
		}
		for _, dp := range h.Histogram.DataPoints {
			routes[otlptest.AttrString(dp.Attributes, otelRouteAttr)] = true
		}
	}
	if !routes["/memberships/{contextKey}"] {
		t.Errorf("%s has no point for route /memberships/{contextKey}: routes %v", otelHTTPDuration, routes)
	}
}

// TestOTelDynamoDB: on DynamoDB, a lookup's store read is a client span of the store's
// (DynamoDB.BatchGetItem: rpc.system.name aws-api, rpc.method DynamoDB/BatchGetItem, the table
// and region) beneath the request's server span, and the AWS credentials are nowhere in what
// is exported.
func TestOTelDynamoDB(t *testing.T) {
	parallelOnMoto(t)
	c, table := dynamoTable(t)
	relayWrite(t, c, table, "", "", "v1", dynamotest.Change{Hash: segments.Hash(otelKey(0)), AddIncluded: []string{"seg-otel.g1"}})
	recv := startReceiver(t)
	env := dynamotest.Vars(t, dynamotest.Shared(t).URL)
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = "AKIDOtter5J", otelAWSSecret
	for k, v := range otelVars(otelEndpoint(recv, "grpc"), "grpc") {
		env[k] = v
	}
	env["BIGSEG_DYNAMODB_TABLE"], env["BIGSEG_API_TOKENS"], env["BIGSEG_STATUS_POLL_INTERVAL"] = table, otelToken, "200ms"
	p := startProcess(t, env)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	tp, traceID, _ := traceparent(true)
	if code, body := otelGet(t, client, p.URL, keyPath(otelKey(0)), "traceparent", tp); code != 200 || !strings.Contains(body, "seg-otel.g1") {
		t.Fatalf("%d %s", code, body)
	}
	var reads spanSet
	waitReceived(t, recv, "the request and its DynamoDB read", func() bool {
		tr := spanSet(recv.Spans()).inTrace(traceID)
		if srv := tr.ofKind(tracepb.Span_SPAN_KIND_SERVER); len(srv) > 0 {
			reads = tr.readsOf(srv[0])
		}
		return len(reads) > 0
	})
	calls := reads.ofKind(tracepb.Span_SPAN_KIND_CLIENT)
	if len(calls) == 0 {
		t.Errorf("the lookup's read has no client span of DynamoDB's (reads %d)", len(reads))
	}
	for _, r := range calls {
		got := map[string]string{}
		for _, k := range []string{"rpc.system.name", "rpc.method", "aws.region"} {
			got[k] = otlptest.AttrString(r.Attributes, k)
		}
		want := map[string]string{"rpc.system.name": "aws-api", "rpc.method": "DynamoDB/BatchGetItem", "aws.region": dynamotest.Region}
		tables := otlptest.AttrString(r.Attributes, "aws.dynamodb.table_names")
		if diff := cmp.Diff(want, got); r.Name != "DynamoDB.BatchGetItem" || diff != "" || !strings.Contains(tables, table) {
			t.Errorf("the read %q (want DynamoDB.BatchGetItem), tables %s (want %s), attributes (-want +got):\n%s", r.Name, tables, table, diff)
		}
	}
	checkNothingLeaked(t, recv, otelKeyMark, otelKey(0), otelToken, otelAWSSecret, "AKIDOtter5J")
}
