package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
)

// counts returns n segments, the largest first: seg-0 has n contexts included and 1 excluded.
func counts(n int) []segments.SegmentCount {
	out := make([]segments.SegmentCount, n)
	for i := range out {
		out[i] = segments.SegmentCount{Ref: fmt.Sprintf("seg-%d.g1", i), Included: int64(n - i), Excluded: 1}
	}
	return out
}

// TestInventoryExportsTheLargest: an environment's largest segments only, the scan's totals,
// and the figures the alerts compare.
func TestInventoryExportsTheLargest(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	inv := metrics.New(reg).Inventory(time.Hour, 2)
	inv.Scanned("production", segments.Inventory{State: segments.ScanComplete, Contexts: 9, Segments: counts(5),
		FinishedAt: time.UnixMilli(1796040000500)}, 3)
	want := `
# HELP bigseg_segment_contexts Contexts of the segment in the environment's store at its last complete inventory scan, by set (included; excluded: excluded and not included), for the environment's largest segments only (at most BIGSEG_INVENTORY_MAX_SEGMENTS).
# TYPE bigseg_segment_contexts gauge
bigseg_segment_contexts{environment="production",segment="seg-0.g1",set="excluded"} 1
bigseg_segment_contexts{environment="production",segment="seg-0.g1",set="included"} 5
bigseg_segment_contexts{environment="production",segment="seg-1.g1",set="excluded"} 1
bigseg_segment_contexts{environment="production",segment="seg-1.g1",set="included"} 4
# HELP bigseg_inventory_contexts Distinct contexts in the environment's store at its last complete inventory scan.
# TYPE bigseg_inventory_contexts gauge
bigseg_inventory_contexts{environment="production"} 9
# HELP bigseg_inventory_segments Segments (refs) found by the environment's last complete inventory scan, exported or not.
# TYPE bigseg_inventory_segments gauge
bigseg_inventory_segments{environment="production"} 5
# HELP bigseg_inventory_segments_shrunk Segments that lost more than half their contexts between the environment's last two complete inventory scans, exported or not.
# TYPE bigseg_inventory_segments_shrunk gauge
bigseg_inventory_segments_shrunk{environment="production"} 3
# HELP bigseg_inventory_scan_timestamp_seconds Unix time when the environment's last complete inventory scan finished; before any, when the inventory began (so that its age alerts on a first scan that never finishes).
# TYPE bigseg_inventory_scan_timestamp_seconds gauge
bigseg_inventory_scan_timestamp_seconds{environment="production"} 1.7960400005e+09
# HELP bigseg_inventory_interval_seconds Interval between two inventory scans of the environment's store (BIGSEG_INVENTORY_INTERVAL).
# TYPE bigseg_inventory_interval_seconds gauge
bigseg_inventory_interval_seconds{environment="production"} 3600
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestInventoryBeforeAnyScan: until a scan completes, the timestamp is when the loop began
// waiting (so the alert on its age fires if the first never ends), no segment shrank, and no
// counts are exported.
func TestInventoryBeforeAnyScan(t *testing.T) {
	reg := prometheus.NewRegistry()
	inv := metrics.New(reg).Inventory(time.Hour, 2)
	before := time.Now()
	inv.Scanned("production", segments.Inventory{State: segments.ScanNone}, 0)
	after := time.Now()
	inv.Scanned("production", segments.Inventory{State: segments.ScanRunning}, 0)
	if n, err := testutil.GatherAndCount(reg, "bigseg_segment_contexts", "bigseg_inventory_contexts", "bigseg_inventory_segments"); err != nil || n != 0 {
		t.Errorf("%d counts before any scan (%v), want none", n, err)
	}
	got := gauges(t, reg)
	if ts := got["bigseg_inventory_scan_timestamp_seconds"]; ts < float64(before.UnixMilli())/1000 || ts > float64(after.UnixMilli())/1000 {
		t.Errorf("timestamp before any scan %v, want between %v and %v", ts, before, after)
	}
	if shrunk, ok := got["bigseg_inventory_segments_shrunk"]; !ok || shrunk != 0 {
		t.Errorf("shrunk before any scan: %v (exported: %v), want 0", shrunk, ok)
	}
}

// gauges returns the value of each gauge of reg (the last series of each name).
func gauges(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.Metric {
			out[f.GetName()] = m.Gauge.GetValue()
		}
	}
	return out
}

// TestInventorySeriesPerEnvironment: the inventory is counted apart from the other metrics'
// series per environment (maxSeriesPerEnvironment): each adds at most two per exported segment
// and five more, however many segments its store holds.
func TestInventorySeriesPerEnvironment(t *testing.T) {
	const maxSegments, n = 10, 20
	scrapeOf := func(envs int) int {
		reg := prometheus.NewRegistry()
		inv := metrics.New(reg).Inventory(time.Hour, maxSegments)
		for i := range envs {
			inv.Scanned(fmt.Sprintf("env-%04d", i), segments.Inventory{State: segments.ScanComplete, Contexts: 1000,
				Segments: counts(500), FinishedAt: time.Now()}, 0)
		}
		return seriesIn(scrape(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), false))
	}
	s1, sn := scrapeOf(1), scrapeOf(n)
	perEnv := float64(sn-s1) / (n - 1)
	t.Logf("the inventory adds %.1f series per environment with %d segments exported of 500", perEnv, maxSegments)
	if limit := float64(2*maxSegments + 5); perEnv > limit {
		t.Errorf("each environment adds %.1f series, want at most %.0f", perEnv, limit)
	}
}
