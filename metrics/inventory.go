package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bigseg/bigseg/segments"
)

// Inventory exports the store inventory: each environment's last complete scan (its largest
// segments' counts, at most maxSegments of them, so that an environment adds at most
// 2*maxSegments+5 series however many segments its store holds), when it finished, and what
// the alerts compare (segments that shrank by half, the interval). It implements the
// inventory loop's Observer; every replica exports what it serves, the scan its own or the one
// the lease holder stored.
type Inventory struct {
	max      int
	interval float64
	now      func() time.Time
	mu       sync.Mutex
	envs     map[string]*inventoryEnv
}

type inventoryEnv struct {
	inv     segments.Inventory // Segments cut to the largest max
	shrunk  int
	found   int       // segments the scan found, all of them
	waiting time.Time // when the loop began waiting for the first complete scan
}

var (
	segmentContextsDesc = prometheus.NewDesc("bigseg_segment_contexts",
		"Contexts of the segment in the environment's store at its last complete inventory scan, by set (included; excluded: excluded and not included), for the environment's largest segments only (at most BIGSEG_INVENTORY_MAX_SEGMENTS).",
		[]string{"environment", "segment", "set"}, nil)
	inventoryContextsDesc = prometheus.NewDesc("bigseg_inventory_contexts",
		"Distinct contexts in the environment's store at its last complete inventory scan.", []string{"environment"}, nil)
	inventorySegmentsDesc = prometheus.NewDesc("bigseg_inventory_segments",
		"Segments (refs) found by the environment's last complete inventory scan, exported or not.", []string{"environment"}, nil)
	inventoryShrunkDesc = prometheus.NewDesc("bigseg_inventory_segments_shrunk",
		"Segments that lost more than half their contexts between the environment's last two complete inventory scans, exported or not.",
		[]string{"environment"}, nil)
	inventoryTimestampDesc = prometheus.NewDesc("bigseg_inventory_scan_timestamp_seconds",
		"Unix time when the environment's last complete inventory scan finished; before any, when the inventory began (so that its age alerts on a first scan that never finishes).",
		[]string{"environment"}, nil)
	inventoryIntervalDesc = prometheus.NewDesc("bigseg_inventory_interval_seconds",
		"Interval between two inventory scans of the environment's store (BIGSEG_INVENTORY_INTERVAL).", []string{"environment"}, nil)
)

// Inventory registers the inventory's metrics: scans every interval, the largest maxSegments
// segments of each environment exported. An environment is exported from its first Scanned.
func (m *Metrics) Inventory(interval time.Duration, maxSegments int) *Inventory {
	i := &Inventory{max: max(maxSegments, 0), interval: interval.Seconds(), now: time.Now, envs: map[string]*inventoryEnv{}}
	m.reg.MustRegister(i)
	return i
}

// Scanned records environment's inventory as the loop publishes it: its last complete scan
// (State ScanNone before any), and how many segments lost more than half their contexts.
func (i *Inventory) Scanned(environment string, inv segments.Inventory, shrunk int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	e := i.envs[environment]
	if e == nil {
		e = &inventoryEnv{waiting: i.now()}
		i.envs[environment] = e
	}
	if inv.FinishedAt.IsZero() {
		return
	}
	e.found, e.shrunk = len(inv.Segments), shrunk
	inv.Segments = inv.Segments[:min(len(inv.Segments), i.max):min(len(inv.Segments), i.max)]
	e.inv = inv
}

// Describe implements prometheus.Collector.
func (i *Inventory) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{segmentContextsDesc, inventoryContextsDesc, inventorySegmentsDesc,
		inventoryShrunkDesc, inventoryTimestampDesc, inventoryIntervalDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (i *Inventory) Collect(ch chan<- prometheus.Metric) {
	i.mu.Lock()
	defer i.mu.Unlock()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for name, e := range i.envs {
		g(inventoryIntervalDesc, i.interval, name)
		g(inventoryShrunkDesc, float64(e.shrunk), name)
		if e.inv.FinishedAt.IsZero() {
			g(inventoryTimestampDesc, float64(e.waiting.UnixMilli())/1000, name)
			continue
		}
		g(inventoryTimestampDesc, float64(e.inv.FinishedAt.UnixMilli())/1000, name)
		g(inventoryContextsDesc, float64(e.inv.Contexts), name)
		g(inventorySegmentsDesc, float64(e.found), name)
		for _, s := range e.inv.Segments {
			g(segmentContextsDesc, float64(s.Included), name, s.Ref, "included")
			g(segmentContextsDesc, float64(s.Excluded), name, s.Ref, "excluded")
		}
	}
}
