package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bigseg/bigseg/segments"
)

// domainVecs are the metrics of the domain's events. The counters and gauges are by
// environment: one series set for each configured environment (Environment), so that the
// label's values are only their names. The store reads' durations are a histogram by
// operation only, for every environment: a histogram is 18 series, and one per environment
// and operation made most of a scrape (52 series an environment, 15 without it).
type domainVecs struct {
	available, stale, lastSync *prometheus.GaugeVec
	polls                      *prometheus.CounterVec // environment, result
	changes, invalidations     *prometheus.CounterVec
	lookups                    *prometheus.CounterVec   // environment, status, source
	storeDurationVec           *prometheus.HistogramVec // operation
	storeErrorsVec             *prometheus.CounterVec   // environment, operation
	cache                      *cacheEntries
}

func newDomainVecs() domainVecs {
	env := []string{"environment"}
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, env)
	}
	c := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(env, labels...))
	}
	d := domainVecs{
		available: g("bigseg_store_available", "1 if the last status poll read the Big Segment store, else 0."),
		stale:     g("bigseg_store_stale", "1 if the Big Segment data was never synchronized or is older than staleAfter, else 0."),
		lastSync:  g("bigseg_store_last_synchronized_timestamp_seconds", "Unix time of the last synchronization of the Big Segment data; 0 if never."),
		polls:     c("bigseg_store_status_polls_total", "Status polls of the Big Segment store, by result (success, error).", "result"),
		changes:   c("bigseg_store_status_changes_total", "Changes of the store's available or stale status."),
		invalidations: c("bigseg_cache_invalidations_total",
			"Times a status poll found a new cursor (the data changed) and every cached membership was dropped."),
		lookups: c("bigseg_membership_lookups_total", "Context lookups, by lookup status and source (cache, store).", "status", "source"),
		storeDurationVec: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bigseg_store_request_duration_seconds",
			Help: "Duration of reads of the Big Segment store, by operation (memberships, metadata), every environment's together.", Buckets: latencyBuckets},
			[]string{"operation"}),
		storeErrorsVec: c("bigseg_store_request_errors_total",
			"Failed reads of contexts' memberships from the Big Segment store (operation memberships); failed metadata reads are bigseg_store_status_polls_total{result=\"error\"}.", "operation"),
		cache: &cacheEntries{of: map[string]func() int{}},
	}
	return d
}

// cacheEntries exports each environment's cache size, read at each scrape.
type cacheEntries struct {
	mu sync.Mutex
	of map[string]func() int
}

var cacheEntriesDesc = prometheus.NewDesc("bigseg_cache_entries",
	"Entries in the environment's membership cache (at most its share of BIGSEG_CACHE_SIZE), expired ones included until their generation is dropped.",
	[]string{"environment"}, nil)

func (c *cacheEntries) Describe(ch chan<- *prometheus.Desc) { ch <- cacheEntriesDesc }

func (c *cacheEntries) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, entries := range c.of {
		ch <- prometheus.MustNewConstMetric(cacheEntriesDesc, prometheus.GaugeValue, float64(entries()), name)
	}
}

func (d *domainVecs) register(reg prometheus.Registerer) {
	reg.MustRegister(d.available, d.stale, d.lastSync, d.polls, d.changes, d.invalidations, d.lookups,
		d.storeDurationVec, d.storeErrorsVec, d.cache)
}

var lookupStatuses = [3]segments.LookupStatus{segments.Healthy, segments.Stale, segments.StoreError}

// environment is the segments.Observer of one environment: its series, made once.
type environment struct {
	available, stale, lastSync prometheus.Gauge
	pollSuccess, pollError     prometheus.Counter
	changes, invalidations     prometheus.Counter
	lookups                    [3][2]prometheus.Counter // by status, then source (store, cache)
	storeDurations             map[string]prometheus.Observer
	storeErrors                prometheus.Counter // memberships' only: a poll's failure is pollError
}

var _ segments.Observer = (*environment)(nil)

// Environment returns the observer of environment name's service, whose counters and gauges
// carry the label environment=name (its store reads' durations go to the histogram of their
// operation, shared by every environment); cacheEntries is read at each scrape for
// bigseg_cache_entries. Call it once per configured environment.
func (m *Metrics) Environment(name string, cacheEntries func() int) segments.Observer {
	d := &m.domain
	e := &environment{
		available: d.available.WithLabelValues(name), stale: d.stale.WithLabelValues(name), lastSync: d.lastSync.WithLabelValues(name),
		pollSuccess: d.polls.WithLabelValues(name, "success"), pollError: d.polls.WithLabelValues(name, "error"),
		changes: d.changes.WithLabelValues(name), invalidations: d.invalidations.WithLabelValues(name),
		storeDurations: map[string]prometheus.Observer{}, storeErrors: d.storeErrorsVec.WithLabelValues(name, segments.OpMemberships),
	}
	for i, st := range lookupStatuses {
		for j, src := range []string{"store", "cache"} {
			e.lookups[i][j] = d.lookups.WithLabelValues(name, string(st), src)
		}
	}
	for _, op := range []string{segments.OpMemberships, segments.OpMetadata} {
		e.storeDurations[op] = d.storeDurationVec.WithLabelValues(op)
	}
	d.cache.mu.Lock()
	d.cache.of[name] = cacheEntries
	d.cache.mu.Unlock()
	return e
}

// Lookup implements segments.Observer.
func (e *environment) Lookup(status segments.LookupStatus, cached bool) {
	i := 0
	switch status {
	case segments.Stale:
		i = 1
	case segments.StoreError:
		i = 2
	}
	j := 0
	if cached {
		j = 1
	}
	e.lookups[i][j].Inc()
}

// StoreRead implements segments.Observer. Each failure is counted once: a membership read's
// here, in bigseg_store_request_errors_total; a metadata read's by StatusPolled, in
// bigseg_store_status_polls_total{result="error"} (segments passes each environment's metadata
// error there, not here).
func (e *environment) StoreRead(op string, d time.Duration, err error) {
	if o, ok := e.storeDurations[op]; ok {
		o.Observe(d.Seconds())
	}
	if err != nil && op == segments.OpMemberships {
		e.storeErrors.Inc()
	}
}

// StatusPolled implements segments.Observer.
func (e *environment) StatusPolled(st segments.StoreStatus, err error, changed bool) {
	if err != nil {
		e.pollError.Inc()
	} else {
		e.pollSuccess.Inc()
	}
	if changed {
		e.changes.Inc()
	}
	e.available.Set(boolFloat(st.Available))
	e.stale.Set(boolFloat(st.Stale))
	if st.LastSynchronized.IsZero() {
		e.lastSync.Set(0)
	} else {
		e.lastSync.Set(float64(st.LastSynchronized.UnixMilli()) / 1000)
	}
}

// DataChanged implements segments.Observer.
func (e *environment) DataChanged() { e.invalidations.Inc() }
