package metrics_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
)

// maxSeriesPerEnvironment bounds what one more configured environment adds to a scrape.
const maxSeriesPerEnvironment = 20

// served returns a registry as cmd/server fills it (the Go and process collectors, every
// listener's metrics, some traffic on each), serving n environments that have each seen
// every kind of event, so that every series that an environment can make exists.
func served(n int) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	m.BuildInfo("v0.0.0-test", "go1.26")
	m.WatchRedisPool(func() metrics.PoolStats { return metrics.PoolStats{TotalConns: 5, IdleConns: 3} })
	m.WatchConnections(func() int { return 1 })
	m.WatchReady(func() bool { return true })
	resp := m.RESP([]string{"get", "ping", "smembers"}, func() int { return 0 })
	resp("get", false, time.Millisecond)
	for _, route := range []string{"/memberships/{contextKey}", "/environments/{env}/memberships/{contextKey}", "/status"} {
		m.ObserveRequest(route, "GET", 200, time.Millisecond)
	}
	for i := range n {
		env := m.Environment(fmt.Sprintf("env-%04d", i), func() int { return 100 })
		for _, st := range []segments.LookupStatus{segments.Healthy, segments.Stale, segments.StoreError} {
			env.Lookup(st, true)
			env.Lookup(st, false)
		}
		for _, op := range []string{segments.OpMemberships, segments.OpMetadata} {
			env.StoreRead(op, time.Millisecond, nil)
			env.StoreRead(op, time.Millisecond, errors.New("down"))
		}
		env.StatusPolled(segments.StoreStatus{Available: true, LastSynchronized: time.UnixMilli(1764430000500)}, nil, true)
		env.StatusPolled(segments.StoreStatus{}, errors.New("down"), true)
		env.DataChanged()
	}
	return reg
}

// serve answers one scrape as /metrics does (promhttp, the text format, gzip when asked).
func serve(h http.Handler, gzipped bool) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if gzipped {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// scrape returns the body of one scrape of h, uncompressed.
func scrape(t testing.TB, h http.Handler, gzipped bool) []byte {
	t.Helper()
	rec := serve(h, gzipped)
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	if !gzipped {
		return rec.Body.Bytes()
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// seriesIn counts the samples of a text-format scrape: one line each, comments aside (a
// histogram is its buckets, +Inf included, its _sum and its _count).
func seriesIn(body []byte) int {
	n := 0
	for line := range bytes.Lines(body) {
		if len(bytes.TrimSpace(line)) > 0 && line[0] != '#' {
			n++
		}
	}
	return n
}

// TestSeriesPerEnvironment keeps what a scrape costs per environment bounded: each configured
// environment adds its counters and gauges, never a histogram of its own (the durations are
// per listener and store operation, for all environments).
func TestSeriesPerEnvironment(t *testing.T) {
	const n = 51
	one := scrape(t, promhttp.HandlerFor(served(1), promhttp.HandlerOpts{}), false)
	many := scrape(t, promhttp.HandlerFor(served(n), promhttp.HandlerOpts{}), false)
	s1, sn := seriesIn(one), seriesIn(many)
	perEnv := float64(sn-s1) / (n - 1)
	t.Logf("1 environment: %d series, %d bytes; %d: %d series, %d bytes; per environment: %.1f series, %.0f bytes",
		s1, len(one), n, sn, len(many), perEnv, float64(len(many)-len(one))/(n-1))
	if perEnv > maxSeriesPerEnvironment {
		t.Errorf("each environment adds %.1f series, want at most %d", perEnv, maxSeriesPerEnvironment)
	}
}

// BenchmarkScrape measures a whole /metrics answer with 1, 200 and 2,000 environments: plain
// text (curl) and gzip (what Prometheus asks for). It reports each scrape's series, its bytes
// uncompressed, the bytes sent, and the process's CPU time per scrape (user and system, the
// garbage collector's included), which a machine shared with other work inflates less than
// ns/op.
//
//	go test ./metrics -run '^$' -bench BenchmarkScrape -benchtime 20x
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1, 200, 2000} {
		h := promhttp.HandlerFor(served(n), promhttp.HandlerOpts{})
		for _, gzipped := range []bool{false, true} {
			name := fmt.Sprintf("environments=%d/%s", n, map[bool]string{false: "text", true: "gzip"}[gzipped])
			b.Run(name, func(b *testing.B) {
				var sent int
				cpu := cpuTime(b)
				for b.Loop() {
					sent = serve(h, gzipped).Body.Len()
				}
				b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
				body := scrape(b, h, gzipped)
				b.ReportMetric(float64(seriesIn(body)), "series")
				b.ReportMetric(float64(len(body)), "bytes")
				b.ReportMetric(float64(sent), "sent_bytes")
			})
		}
	}
}

// TestStoreDurationsAreByOperation: the reads of every environment go to one histogram per
// operation, and the memberships' errors stay counted by environment. A metadata read's error
// is not counted here: its poll counts it (bigseg_store_status_polls_total), once.
func TestStoreDurationsAreByOperation(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	a, b := m.Environment("a", func() int { return 0 }), m.Environment("b", func() int { return 0 })
	a.StoreRead(segments.OpMemberships, time.Millisecond, nil)
	b.StoreRead(segments.OpMemberships, time.Millisecond, errors.New("down"))
	b.StoreRead(segments.OpMetadata, time.Millisecond, errors.New("down"))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	errs := map[string]float64{}
	for _, f := range families {
		for _, s := range f.Metric {
			labels := map[string]string{}
			for _, l := range s.Label {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "bigseg_store_request_duration_seconds":
				if _, ok := labels["environment"]; ok {
					t.Errorf("%s has an environment label: %v", f.GetName(), labels)
				}
				got[labels["operation"]] = s.Histogram.GetSampleCount()
			case "bigseg_store_request_errors_total":
				errs[labels["environment"]+" "+labels["operation"]] = s.Counter.GetValue()
			}
		}
	}
	if d := cmp.Diff(map[string]uint64{"memberships": 2, "metadata": 1}, got); d != "" {
		t.Errorf("store reads by operation (-want +got):\n%s", d)
	}
	want := map[string]float64{"a memberships": 0, "b memberships": 1}
	if d := cmp.Diff(want, errs); d != "" {
		t.Errorf("store errors by environment and operation (-want +got):\n%s", d)
	}
}

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
