package metrics

import "github.com/prometheus/client_golang/prometheus"

// PoolStats are a Redis client's connection pool figures (go-redis's PoolStats, without
// this package depending on go-redis).
type PoolStats struct {
	Hits, Misses, Timeouts uint64 // connection requests: reused, new, timed out
	TotalConns, IdleConns  uint64
	Removed                uint64 // connections removed from the pool as broken or expired, ever
}

// WatchRedisPool exports the pool figures returned by stats, read at each scrape.
func (m *Metrics) WatchRedisPool(stats func() PoolStats) {
	m.reg.MustRegister(poolCollector{stats})
}

var (
	poolHits = prometheus.NewDesc("bigseg_redis_pool_hits_total",
		"Times a free connection was found in the Redis pool.", nil, nil)
	poolMisses = prometheus.NewDesc("bigseg_redis_pool_misses_total",
		"Times no free connection was in the Redis pool and one was made.", nil, nil)
	poolTimeouts = prometheus.NewDesc("bigseg_redis_pool_timeouts_total",
		"Times waiting for a Redis pool connection timed out.", nil, nil)
	poolRemoved = prometheus.NewDesc("bigseg_redis_pool_removed_connections_total",
		"Connections removed from the Redis pool as broken or expired.", nil, nil)
	poolConns = prometheus.NewDesc("bigseg_redis_pool_connections",
		"Connections in the Redis pool, by state (idle, in_use).", []string{"state"}, nil)
)

type poolCollector struct{ stats func() PoolStats }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolHits, poolMisses, poolTimeouts, poolRemoved, poolConns} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(poolHits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(poolMisses, prometheus.CounterValue, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(poolTimeouts, prometheus.CounterValue, float64(s.Timeouts))
	ch <- prometheus.MustNewConstMetric(poolRemoved, prometheus.CounterValue, float64(s.Removed))
	inUse := s.TotalConns - min(s.IdleConns, s.TotalConns)
	ch <- prometheus.MustNewConstMetric(poolConns, prometheus.GaugeValue, float64(s.IdleConns), "idle")
	ch <- prometheus.MustNewConstMetric(poolConns, prometheus.GaugeValue, float64(inUse), "in_use")
}
