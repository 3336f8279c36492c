package metrics_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
)

// newMetrics returns metrics with one environment, "production", whose observer is env.
func newMetrics(t *testing.T) (m *metrics.Metrics, env segments.Observer, reg *prometheus.Registry) {
	t.Helper()
	reg = prometheus.NewRegistry()
	m = metrics.New(reg)
	env = m.Environment("production", func() int { return 42 })
	m.WatchRedisPool(func() metrics.PoolStats {
		return metrics.PoolStats{Hits: 10, Misses: 2, Timeouts: 1, TotalConns: 5, IdleConns: 3, Removed: 4}
	})
	return m, env, reg
}

func TestLint(t *testing.T) {
	m, env, reg := newMetrics(t)
	env.Lookup(segments.Healthy, true)
	env.StoreRead(segments.OpMemberships, time.Millisecond, errors.New("x"))
	env.StatusPolled(segments.StoreStatus{Available: true}, nil, true)
	m.ObserveRequest("/memberships/{contextKey}", "GET", 200, time.Millisecond)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestStatusGaugesFollow(t *testing.T) {
	_, env, reg := newMetrics(t)
	synced := time.UnixMilli(1764430000500)
	env.StatusPolled(segments.StoreStatus{Available: true, LastSynchronized: synced}, nil, true)
	env.StatusPolled(segments.StoreStatus{Available: false, Stale: true, LastSynchronized: synced}, errors.New("down"), true)
	env.StatusPolled(segments.StoreStatus{Available: false, Stale: true, LastSynchronized: synced}, errors.New("down"), false)
	want := `
# HELP bigseg_store_available 1 if the last status poll read the Big Segment store, else 0.
# TYPE bigseg_store_available gauge
bigseg_store_available{environment="production"} 0
# HELP bigseg_store_last_synchronized_timestamp_seconds Unix time of the last synchronization of the Big Segment data; 0 if never.
# TYPE bigseg_store_last_synchronized_timestamp_seconds gauge
bigseg_store_last_synchronized_timestamp_seconds{environment="production"} 1.7644300005e+09
# HELP bigseg_store_stale 1 if the Big Segment data was never synchronized or is older than staleAfter, else 0.
# TYPE bigseg_store_stale gauge
bigseg_store_stale{environment="production"} 1
# HELP bigseg_store_status_changes_total Changes of the store's available or stale status.
# TYPE bigseg_store_status_changes_total counter
bigseg_store_status_changes_total{environment="production"} 2
# HELP bigseg_store_status_polls_total Status polls of the Big Segment store, by result (success, error).
# TYPE bigseg_store_status_polls_total counter
bigseg_store_status_polls_total{environment="production",result="error"} 2
bigseg_store_status_polls_total{environment="production",result="success"} 1
# HELP bigseg_store_request_errors_total Failed reads of contexts' memberships from the Big Segment store (operation memberships); failed metadata reads are bigseg_store_status_polls_total{result="error"}.
# TYPE bigseg_store_request_errors_total counter
bigseg_store_request_errors_total{environment="production",operation="memberships"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"bigseg_store_available", "bigseg_store_stale", "bigseg_store_last_synchronized_timestamp_seconds",
		"bigseg_store_status_changes_total", "bigseg_store_status_polls_total", "bigseg_store_request_errors_total"); err != nil {
		t.Error(err)
	}
}

func TestLookupsAndRequests(t *testing.T) {
	m, env, reg := newMetrics(t)
	env.Lookup(segments.Healthy, true)
	env.Lookup(segments.Healthy, false)
	env.Lookup(segments.Stale, true)
	env.Lookup(segments.StoreError, false)
	m.ObserveRequest("/memberships/{contextKey}", "GET", 200, time.Millisecond)
	m.ObserveRequest("/memberships/{contextKey}", "GET", 200, time.Millisecond)
	m.ObserveRequest("", "GET", 404, time.Millisecond)
	want := `
# HELP bigseg_membership_lookups_total Context lookups, by lookup status and source (cache, store).
# TYPE bigseg_membership_lookups_total counter
bigseg_membership_lookups_total{environment="production",source="cache",status="HEALTHY"} 1
bigseg_membership_lookups_total{environment="production",source="cache",status="STALE"} 1
bigseg_membership_lookups_total{environment="production",source="cache",status="STORE_ERROR"} 0
bigseg_membership_lookups_total{environment="production",source="store",status="HEALTHY"} 1
bigseg_membership_lookups_total{environment="production",source="store",status="STALE"} 0
bigseg_membership_lookups_total{environment="production",source="store",status="STORE_ERROR"} 1
# HELP bigseg_http_requests_total HTTP requests, by chi route pattern, method and status code.
# TYPE bigseg_http_requests_total counter
bigseg_http_requests_total{code="200",method="GET",route="/memberships/{contextKey}"} 2
bigseg_http_requests_total{code="404",method="GET",route="unmatched"} 1
# HELP bigseg_cache_entries Entries in the environment's membership cache (at most its share of BIGSEG_CACHE_SIZE), expired ones included until their generation is dropped.
# TYPE bigseg_cache_entries gauge
bigseg_cache_entries{environment="production"} 42
# HELP bigseg_redis_pool_connections Connections in the Redis pool, by state (idle, in_use).
# TYPE bigseg_redis_pool_connections gauge
bigseg_redis_pool_connections{state="idle"} 3
bigseg_redis_pool_connections{state="in_use"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"bigseg_membership_lookups_total", "bigseg_http_requests_total", "bigseg_cache_entries", "bigseg_redis_pool_connections"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "bigseg_http_request_duration_seconds"); n != 2 {
		t.Errorf("duration series = %d, want 2", n)
	}
}

func BenchmarkLookup(b *testing.B) {
	env := metrics.New(prometheus.NewRegistry()).Environment("production", func() int { return 0 })
	for b.Loop() {
		env.Lookup(segments.Healthy, true)
	}
}

func BenchmarkObserveRequest(b *testing.B) {
	m := metrics.New(prometheus.NewRegistry())
	for b.Loop() {
		m.ObserveRequest("/memberships/{contextKey}", "GET", 200, time.Millisecond)
	}
}
