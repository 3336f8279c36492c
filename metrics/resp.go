package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RESP exports the Redis-protocol listener's metrics: commands answered, by name (those of
// commands, else "other") and result, their durations, and the connections open (read at
// each scrape). It returns the observer of the commands.
func (m *Metrics) RESP(commands []string, open func() int) func(command string, failed bool, d time.Duration) {
	counts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bigseg_resp_commands_total",
		Help: "Commands answered on the Redis-protocol listener, by command (else other) and result (ok, error)."}, []string{"command", "result"})
	durations := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bigseg_resp_command_duration_seconds",
		Help: "Duration of commands on the Redis-protocol listener, by command.", Buckets: latencyBuckets}, []string{"command"})
	m.reg.MustRegister(counts, durations, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "bigseg_resp_open_connections",
		Help: "Client connections open on the Redis-protocol listener (at most BIGSEG_MAX_CONNS)."}, func() float64 { return float64(open()) }))
	type series struct {
		ok, failed prometheus.Counter
		duration   prometheus.Observer
	}
	byName := map[string]series{}
	for _, c := range append(commands, "other") {
		byName[c] = series{counts.WithLabelValues(c, "ok"), counts.WithLabelValues(c, "error"), durations.WithLabelValues(c)}
	}
	return func(command string, failed bool, d time.Duration) {
		s, ok := byName[command]
		if !ok {
			s = byName["other"]
		}
		if failed {
			s.failed.Inc()
		} else {
			s.ok.Inc()
		}
		s.duration.Observe(d.Seconds())
	}
}
