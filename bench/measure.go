package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"time"
)

// measurement is one system measured once.
type measurement struct {
	system     *system
	round      int
	wrk        wrkResult
	serverCPU  time.Duration // utime+stime of the server over the measurement; 0 without a server
	redisCPU   time.Duration // the same of redis-server
	counters   counters      // deltas over the measurement
	warmupReqs int64         // requests of the Zipf warm-up before it
}

// counters are the figures that show cache hits and round trips, from the server's /metrics
// and Redis's INFO commandstats.
type counters struct {
	lookups      float64 // lookups the server made
	storeLookups float64 // lookups it answered from the store (misses)
	roundTrips   float64 // Redis round trips for memberships
	smembers     float64 // SMEMBERS calls Redis served
}

func (c counters) sub(o counters) counters {
	return counters{c.lookups - o.lookups, c.storeLookups - o.storeLookups, c.roundTrips - o.roundTrips, c.smembers - o.smembers}
}

// rounds measures every system once per round, every other round in reverse order, so that
// a machine that grows faster or slower during the run favours no system.
func (b *bench) rounds(ctx context.Context, systems []*system) error {
	for round := 1; round <= b.o.rounds; round++ {
		logf("round %d of %d", round, b.o.rounds)
		order := slices.Clone(systems)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, s := range order {
			m, err := b.measure(ctx, s, round)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", s.name, round, err)
			}
			b.report.runs = append(b.report.runs, m)
			cpu, whose := m.cpuPerRequest(), "server"
			if s.proc == nil {
				cpu, whose = m.redisPerRequest(), "Redis"
			}
			hits := ""
			if c := m.counters; c.lookups > 0 {
				hits = fmt.Sprintf("  %5.1f%% cache hits", 100*(1-c.storeLookups/c.lookups))
			}
			logf("  %-50s %8.0f req/s  %6.1f µs %s CPU/req%s", s.name, m.wrk.perSecond(), micros(cpu), whose, hits)
		}
	}
	return nil
}

// measure warms a Zipf system up, then drives it for the measurement's duration and takes the
// deltas of CPU times and counters around it.
func (b *bench) measure(ctx context.Context, s *system, round int) (measurement, error) {
	m := measurement{system: s, round: round}
	var start int64 // where the Zipf walk starts: a stretch of the key file per round
	if s.scenario == "zipf" {
		start = int64(round-1) * b.zipfLen / int64(b.o.rounds)
		if b.o.warmup > 0 {
			w, err := b.drive(ctx, s, b.o.warmup, round, start)
			if err != nil {
				return m, fmt.Errorf("warm-up: %w", err)
			}
			m.warmupReqs, start = w.Total, start+w.Total // go on where the warm-up stopped
		}
	}
	before, err := b.settledCounters(ctx, s)
	if err != nil {
		return m, err
	}
	server0, redis0, err := b.cpuTimes(s)
	if err != nil {
		return m, err
	}
	if m.wrk, err = b.drive(ctx, s, b.o.duration, round, start); err != nil {
		return m, err
	}
	server1, redis1, err := b.cpuTimes(s)
	if err != nil {
		return m, err
	}
	after, err := b.settledCounters(ctx, s)
	if err != nil {
		return m, err
	}
	m.serverCPU, m.redisCPU, m.counters = server1-server0, redis1-redis0, after.sub(before)
	if s.kind == kindBigseg && m.counters.lookups == 0 {
		logf("  %s: /metrics has no bigseg_membership_lookups_total: no hit ratio or round trips", s.name)
	}
	return m, nil
}

// cpuTimes reads the CPU time used so far by the system's server (0 if it has none) and Redis.
func (b *bench) cpuTimes(s *system) (server, redis time.Duration, err error) {
	if s.proc != nil {
		if server, err = cpuTime(s.proc.pid()); err != nil {
			return 0, 0, err
		}
	}
	redis, err = cpuTime(b.redis.proc.pid())
	return server, redis, err
}

// drive runs the load of the system's scenario for d: wrk with the scenario's script, or for
// the Redis ceiling its own client. Every system of a round gets the same seed (and for Zipf
// the same stretch of keys), so that they see the same keys.
func (b *bench) drive(ctx context.Context, s *system, d time.Duration, round int, zipfStart int64) (wrkResult, error) {
	seed, n := strconv.Itoa(round), strconv.Itoa(b.o.contexts)
	if s.resp {
		return b.driveRESP(ctx, s, d, seed, zipfStart)
	}
	switch s.scenario {
	case "hot":
		return runWrk(ctx, b.o, s.proc.lookups, b.scripts["uniform"], d, seed, strconv.Itoa(hotKeys))
	case "cold":
		return runWrk(ctx, b.o, s.proc.lookups, b.scripts["uniform"], d, seed, n)
	case "zipf":
		return runWrk(ctx, b.o, s.proc.lookups, b.scripts["zipf"], d, b.zipfKeys,
			strconv.FormatInt(zipfStart%b.zipfLen, 10), strconv.Itoa(b.o.threads))
	case "batch":
		return runWrk(ctx, b.o, s.proc.lookups, b.scripts["batch"], d, seed, n, strconv.Itoa(batchSize))
	}
	cmd := exec.CommandContext(ctx, "taskset", "-c", b.o.clientCPUs, b.bins.ceiling, "redis",
		"-redis", b.redis.url, "-prefix", prefix, "-contexts", n, "-workers", strconv.Itoa(b.o.connections),
		"-duration", d.String(), "-seed", seed)
	return runSummarized(ctx, "ceiling redis", cmd)
}

// driveRESP runs bench/respload against the system's Redis-protocol listener for d: the hot
// keys uniformly, or the Zipf keys from zipfStart, as wrk's scripts do over HTTP.
func (b *bench) driveRESP(ctx context.Context, s *system, d time.Duration, seed string, zipfStart int64) (wrkResult, error) {
	args := []string{"-c", b.o.clientCPUs, b.bins.respload, "-addr", s.proc.resp, "-prefix", prefix,
		"-c", strconv.Itoa(b.o.connections), "-d", d.String()}
	if s.scenario == "zipf" {
		args = append(args, "-zipf", b.zipfKeys, "-start", strconv.FormatInt(zipfStart%b.zipfLen, 10))
	} else {
		args = append(args, "-keys", strconv.Itoa(hotKeys), "-seed", seed)
	}
	return runSummarized(ctx, "respload", exec.CommandContext(ctx, "taskset", args...))
}

// settledCounters reads the counters once the requests still in flight when the load stopped
// have finished: two reads in a row agree.
func (b *bench) settledCounters(ctx context.Context, s *system) (counters, error) {
	prev, err := b.readCounters(ctx, s)
	for range 50 {
		if err != nil {
			return prev, err
		}
		time.Sleep(20 * time.Millisecond)
		var c counters
		if c, err = b.readCounters(ctx, s); err == nil && c == prev {
			return c, nil
		}
		prev = c
	}
	return prev, err
}

func (b *bench) readCounters(ctx context.Context, s *system) (counters, error) {
	var c counters
	var err error
	if c.smembers, err = b.redis.commandCalls(ctx, "smembers"); err != nil {
		return c, err
	}
	if s.kind != kindBigseg && s.kind != kindWrapper {
		return c, nil
	}
	families, err := scrape(ctx, s.proc.metrics+"/metrics")
	if err != nil {
		return c, err
	}
	if s.kind == kindBigseg {
		// Lookups that failed (those of requests whose client left when wrk stopped, cancelled
		// before their read) and failed reads are left out.
		const lookups, reads = "bigseg_membership_lookups_total", "bigseg_store_request_duration_seconds"
		c.lookups = sumMetric(families, lookups) - sumMetric(families, lookups, "status", "STORE_ERROR")
		c.storeLookups = sumMetric(families, lookups, "source", "store") -
			sumMetric(families, lookups, "source", "store", "status", "STORE_ERROR")
		c.roundTrips = sumMetric(families, reads, "operation", "memberships") -
			sumMetric(families, "bigseg_store_request_errors_total", "operation", "memberships")
	} else {
		c.lookups = sumMetric(families, "ldwrapper_lookups_total")
		c.storeLookups = sumMetric(families, "ldwrapper_store_reads_total")
		c.roundTrips = 2 * c.storeLookups // two SMEMBERS, one after the other
	}
	return c, nil
}
