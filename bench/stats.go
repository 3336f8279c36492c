package main

import (
	"math"
	"time"
)

// Figures of one measurement. CPU figures are per request answered (wrk's count).

func (m measurement) requests() float64 { return m.wrk.perSecond() }

func (m measurement) lookups() float64 { return m.wrk.perSecond() * float64(m.system.perRequest) }

func (m measurement) cpuPerRequest() time.Duration { return perRequest(m.serverCPU, m.wrk.Total) }

func (m measurement) cpuPerLookup() time.Duration {
	return perRequest(m.serverCPU, m.wrk.Total*int64(m.system.perRequest))
}

func (m measurement) redisPerRequest() time.Duration { return perRequest(m.redisCPU, m.wrk.Total) }

// core is the share of the server CPU that the server and Redis kept busy: near 1, the
// server CPU was the limit; well below, something else was (wrk, latency, locks).
func (m measurement) core() float64 {
	if m.wrk.DurationUs <= 0 {
		return 0
	}
	return (m.serverCPU + m.redisCPU).Seconds() / m.wrk.duration().Seconds()
}

func perRequest(cpu time.Duration, n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	return cpu / time.Duration(n)
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// stat is one figure over the rounds.
type stat struct{ mean, min, max float64 }

func statOf(xs []float64) stat {
	if len(xs) == 0 {
		return stat{}
	}
	s := stat{min: math.Inf(1), max: math.Inf(-1)}
	for _, x := range xs {
		s.mean += x / float64(len(xs))
		s.min, s.max = math.Min(s.min, x), math.Max(s.max, x)
	}
	return s
}

// spread is the range of the rounds relative to their mean.
func (s stat) spread() float64 {
	if s.mean == 0 {
		return 0
	}
	return (s.max - s.min) / s.mean
}

// summary is one system over all its rounds: means and ranges of the per-round figures, and
// ratios of the counters summed over the rounds.
type summary struct {
	sys                                   *system
	runs                                  []measurement // by round
	requests, lookups                     stat
	p50, p99                              stat // milliseconds
	cpuPerRequest, cpuPerLookup, redisCPU stat // microseconds
	core                                  stat
	errors                                int64
	counters                              counters
}

func summarize(sys *system, all []measurement) summary {
	s := summary{sys: sys}
	var req, lk, p50, p99, cpu, cpuL, red, core []float64
	for _, m := range all {
		if m.system != sys {
			continue
		}
		s.runs = append(s.runs, m)
		req, lk = append(req, m.requests()), append(lk, m.lookups())
		p50, p99 = append(p50, float64(m.wrk.P50us)/1000), append(p99, float64(m.wrk.P99us)/1000)
		cpu, cpuL = append(cpu, micros(m.cpuPerRequest())), append(cpuL, micros(m.cpuPerLookup()))
		red, core = append(red, micros(m.redisPerRequest())), append(core, m.core())
		s.errors += m.wrk.Non2xx + m.wrk.Errors
		c := m.counters
		s.counters = counters{s.counters.lookups + c.lookups, s.counters.storeLookups + c.storeLookups,
			s.counters.roundTrips + c.roundTrips, s.counters.smembers + c.smembers}
	}
	s.requests, s.lookups, s.p50, s.p99 = statOf(req), statOf(lk), statOf(p50), statOf(p99)
	s.cpuPerRequest, s.cpuPerLookup, s.redisCPU, s.core = statOf(cpu), statOf(cpuL), statOf(red), statOf(core)
	return s
}

// hasServer says whether the system has a server whose CPU is measured.
func (s summary) hasServer() bool { return s.sys.proc != nil }

// hasCounters says whether the system counts its lookups (bigseg and the wrapper).
func (s summary) hasCounters() bool { return s.counters.lookups > 0 }

// hitRatio is the share of lookups answered from the cache.
func (s summary) hitRatio() float64 { return 1 - s.counters.storeLookups/s.counters.lookups }

func (s summary) roundTripsPerLookup() float64 { return s.counters.roundTrips / s.counters.lookups }

// smembersPerLookup is Redis's count of SMEMBERS per lookup: per lookup the server counted,
// or else per lookup answered (wrk's count, which misses those in flight when it stopped).
func (s summary) smembersPerLookup() float64 {
	lookups := s.counters.lookups
	if !s.hasCounters() {
		for _, m := range s.runs {
			lookups += float64(m.wrk.Total * int64(m.system.perRequest))
		}
	}
	if lookups == 0 {
		return 0
	}
	return s.counters.smembers / lookups
}

// ratio compares a figure of two systems: the ratio of their means, and the range of the
// ratios of the rounds, which were measured side by side.
type ratio struct {
	value, min, max float64
	rounds          int  // rounds in which both were measured
	ok              bool // both systems were measured
}

func pairedRatio(a, b *summary, figure func(measurement) float64) ratio {
	if a == nil || b == nil || len(a.runs) == 0 || len(b.runs) == 0 {
		return ratio{}
	}
	var num, den, per []float64
	for _, ma := range a.runs {
		for _, mb := range b.runs {
			if ma.round == mb.round && figure(mb) != 0 {
				num, den = append(num, figure(ma)), append(den, figure(mb))
				per = append(per, figure(ma)/figure(mb))
			}
		}
	}
	if len(per) == 0 || statOf(den).mean == 0 {
		return ratio{}
	}
	r := statOf(per)
	return ratio{value: statOf(num).mean / statOf(den).mean, min: r.min, max: r.max, rounds: len(per), ok: true}
}

// Figures that ratios compare.
var (
	figRequests      = func(m measurement) float64 { return m.requests() }
	figLookups       = func(m measurement) float64 { return m.lookups() }
	figCPUPerRequest = func(m measurement) float64 { return micros(m.cpuPerRequest()) }
	figCPUPerLookup  = func(m measurement) float64 { return micros(m.cpuPerLookup()) }
)
