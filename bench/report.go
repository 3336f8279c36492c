package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

type measurement struct {
	system        string
	result        result
	counters      counters
	cpuPerRequest time.Duration // server CPU time per request
}

type report struct {
	options
	started   time.Time
	elapsed   time.Duration
	goVersion string
	cpus      int
	bodySize  int
	runs      []measurement
	storm     stormResult
	memory    float64
	profiles  []namedProfile
}

func (r *report) add(m measurement) { r.runs = append(r.runs, m) }

// summary averages a system's rounds.
type summary struct {
	requests, lookups float64
	p50, p99          time.Duration
	errors, non2xx    int64
	counters          counters
	cpuPerRequest     time.Duration
	rounds            int
}

func (r *report) summary(system string) summary {
	var s summary
	for _, m := range r.runs {
		if m.system != system {
			continue
		}
		s.rounds++
		s.requests += m.result.Requests
		s.lookups += m.result.Lookups
		s.p50 += m.result.P50
		s.p99 += m.result.P99
		s.errors += m.result.Errors
		s.non2xx += m.result.Non2xx
		s.counters.requests += m.counters.requests
		s.counters.lookups += m.counters.lookups
		s.counters.storeReads += m.counters.storeReads
		s.counters.smembers += m.counters.smembers
		s.cpuPerRequest += m.cpuPerRequest
	}
	if s.rounds > 0 {
		n := float64(s.rounds)
		s.requests, s.lookups = s.requests/n, s.lookups/n
		s.p50, s.p99 = s.p50/time.Duration(s.rounds), s.p99/time.Duration(s.rounds)
		s.cpuPerRequest /= time.Duration(s.rounds)
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func (r *report) write(stdout io.Writer, path string) error {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "## Run of %s\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %s. Command: `bench/run -contexts %d -duration %s -rounds %d -connections %d -threads %d`. "+
		"%d contexts seeded; each system measured %d times, alternating (every other round in reverse order); figures are the means. Response body: %d bytes. Took %s.\n\n",
		host, r.cpus, r.goVersion, r.contexts, r.duration, r.rounds, r.connections, r.threads, r.contexts, r.rounds, r.bodySize, r.elapsed.Round(time.Second))

	chi, hot, cold, batch, redis := r.summary(sysChi), r.summary(sysHot), r.summary(sysCold), r.summary(sysBatch), r.summary(sysRedis)
	fmt.Fprintf(&b, "| system | requests/s | lookups/s | p50 | p99 | errors | server CPU per request | vs bare chi |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range []struct {
		name string
		s    summary
	}{{sysChi, chi}, {sysHot, hot}, {sysCold, cold}, {sysBatch, batch}, {sysRedis, redis}} {
		cpu := "n/a"
		if row.s.cpuPerRequest > 0 {
			cpu = fmt.Sprintf("%.1f µs", float64(row.s.cpuPerRequest)/float64(time.Microsecond))
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %s | %s | %d | %s | %.2f |\n", row.name, row.s.requests, row.s.lookups,
			ms(row.s.p50), ms(row.s.p99), row.s.errors+row.s.non2xx, cpu, row.s.requests/chi.requests)
	}

	fmt.Fprintf(&b, "\nEach round (requests/s):\n\n| system |")
	for i := 1; i <= r.rounds; i++ {
		fmt.Fprintf(&b, " round %d |", i)
	}
	fmt.Fprintf(&b, "\n|---|%s\n", strings.Repeat("---:|", r.rounds))
	for _, sys := range []string{sysChi, sysHot, sysCold, sysBatch, sysRedis} {
		fmt.Fprintf(&b, "| %s |", sys)
		for _, m := range r.runs {
			if m.system == sys {
				fmt.Fprintf(&b, " %.0f |", m.result.Requests)
			}
		}
		fmt.Fprintln(&b)
	}

	check := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	hotRatio, coldRatio := hot.requests/chi.requests, cold.requests/chi.requests
	batchRatio := batch.lookups / cold.requests
	coldReadsPerLookup := cold.counters.storeReads / cold.counters.lookups
	coldSmembersPerLookup := cold.counters.smembers / cold.counters.lookups
	batchReadsPerRequest := batch.counters.storeReads / batch.counters.requests
	batchSmembersPerRequest := batch.counters.smembers / batch.counters.requests
	fmt.Fprintf(&b, "\n| target | measured | |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| hot >= 0.90 x bare chi | %.2f x | %s |\n", hotRatio, check(hotRatio >= 0.90))
	fmt.Fprintf(&b, "| cold >= 0.45 x bare chi | %.2f x (%.2f x the Redis ceiling) | %s |\n", coldRatio, cold.requests/redis.requests, check(coldRatio >= 0.45))
	fmt.Fprintf(&b, "| cold: one Redis round trip per lookup | %.3f store reads (pipelines) and %.2f SMEMBERS per lookup | %s |\n",
		coldReadsPerLookup, coldSmembersPerLookup, check(coldReadsPerLookup <= 1 && coldSmembersPerLookup > 1.99 && coldSmembersPerLookup < 2.01))
	fmt.Fprintf(&b, "| storm: 1 store read for %d concurrent requests, all answered | %d store read(s), %d of %d answered 200 HEALTHY in %s | %s |\n",
		r.storm.requests, r.storm.storeReads, r.storm.ok, r.storm.requests, ms(r.storm.elapsed), check(r.storm.storeReads == 1 && r.storm.ok == r.storm.requests))
	fmt.Fprintf(&b, "| batch lookups/s >= 5 x cold requests/s | %.1f x | %s |\n", batchRatio, check(batchRatio >= 5))
	fmt.Fprintf(&b, "| batch: one round trip per batch | %.3f store reads and %.1f SMEMBERS per batch of %d | %s |\n",
		batchReadsPerRequest, batchSmembersPerRequest, batchSize, check(batchReadsPerRequest > 0.999 && batchReadsPerRequest < 1.001))
	fmt.Fprintf(&b, "| memory <= 250 heap bytes per cached context (1,000,000 cached) | %.0f bytes | %s |\n", r.memory, check(r.memory <= 250))
	fmt.Fprintf(&b, "| no errors | %d | %s |\n", hot.errors+hot.non2xx+cold.errors+cold.non2xx+batch.errors+batch.non2xx,
		check(hot.errors+hot.non2xx+cold.errors+cold.non2xx+batch.errors+batch.non2xx == 0))

	for _, p := range r.profiles {
		fmt.Fprintf(&b, "\n### CPU profile: %s\n\n```\n%s```\n", p.system, p.top)
	}
	out := b.String()
	fmt.Fprint(stdout, out)
	return os.WriteFile(path, []byte(out), 0o644)
}
