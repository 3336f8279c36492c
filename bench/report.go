package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// report is what a run found, written as markdown to stdout and bench/results/latest.md, in
// the form of BENCHMARKS.md's "Latest run".
type report struct {
	o              options
	started        time.Time
	elapsed        time.Duration
	body           int      // bytes of the answer the chi ceiling copies
	headers        []string // its headers, which the ceiling copies
	baselineCommit string
	systems        []*system
	runs           []measurement
	storms         []stormResult
	memory         []memoryResult
	profiles       []namedProfile
	idle           []idleResult // with -baseline-environments

	redisBytesPerContext float64 // Redis's used_memory per seeded context
}

func newReport(o options, started time.Time) *report { return &report{o: o, started: started} }

func (r *report) write(stdout io.Writer, path string) error {
	var b strings.Builder
	sums := map[*system]*summary{}
	for _, s := range r.systems {
		sum := summarize(s, r.runs)
		sums[s] = &sum
	}
	r.writeHeader(&b)
	if len(r.systems) > 0 {
		r.writeTable(&b, sums)
		r.writeRounds(&b, sums)
	}
	r.writeTargets(&b, sums)
	r.writeAB(&b, sums)
	r.writeRESP(&b, sums)
	r.writeStormsAndMemory(&b)
	r.writeEnvironments(&b)
	for _, p := range r.profiles {
		fmt.Fprintf(&b, "\n### CPU profile: %s\n\n```\n%s```\n", p.system, p.top)
	}
	out := b.String()
	fmt.Fprint(stdout, out)
	return os.WriteFile(path, []byte(out), 0o644)
}

func (r *report) writeHeader(b *strings.Builder) {
	host, _ := os.Hostname()
	o := r.o
	fmt.Fprintf(b, "## Run of %s\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(b, "Machine: %s, %d CPUs, %s. Command: `%s`. Took %s.\n\n",
		host, runtime.NumCPU(), runtime.Version(), strings.Join(append([]string{"bench/run"}, o.args...), " "), r.elapsed.Round(time.Second))
	fmt.Fprintf(b, "Pinned: every server under test and the run's private redis-server on CPU %s, wrk on CPU %s (`taskset`). "+
		"%d contexts seeded (%d distinct membership sets) with a cursor, and `synchronized_on` refreshed every %d s, as the Relay Proxy leaves them. "+
		"%d rounds of %s per system, alternating (every other round in reverse order), with wrk -t%d -c%d; "+
		"figures are the means of the rounds. CPU figures are utime+stime from /proc over the measurement, per request (or lookup) answered. ",
		o.serverCPUs, o.clientCPUs, o.contexts, distinctSets, relayIdleEvery, o.rounds, o.duration, o.threads, o.connections)
	if o.scenarios["zipf"] {
		fmt.Fprintf(b, "Zipf: keys drawn with s = %g over the %d contexts, after %s of Zipf warm-up, at every system's default cache settings. ",
			zipfExponent, o.contexts, o.warmup)
	}
	if r.body > 0 {
		fmt.Fprintf(b, "The bare chi ceiling answers with a real bigseg answer: %d bytes, headers %s (and Date). ",
			r.body, "`"+strings.Join(r.headers, "`, `")+"`")
	}
	if o.baseline != "" {
		fmt.Fprintf(b, "Baseline: `%s` = %s. ", o.baseline, r.baselineCommit)
	}
	fmt.Fprint(b, "\n\nSettings: bigseg hot runs with `BIGSEG_CACHE_SIZE=100000 BIGSEG_CACHE_TTL=1h`, its 1,000 keys cached before the rounds; "+
		"cold and batch with `BIGSEG_CACHE_SIZE=0`; zipf and storm at bigseg's defaults. "+
		"The LaunchDarkly wrapper (bench/ldwrapper: `ldstoreimpl.NewBigSegmentStoreWrapperWithConfig` at the SDK's defaults, "+
		"1,000 contexts cached for 5 s, status polled every 5 s, stale after 2 min, over a store that reads like LaunchDarkly's "+
		"Redis integrations: two SMEMBERS one after the other) runs hot with `ContextCacheTime` 1h, its 1,000 entries holding the 1,000 keys; "+
		"cold with `ContextCacheTime` 0, since the SDK cannot turn its cache off (every entry expires as it is stored); zipf at the defaults. "+
		"Cache hit ratio: bigseg's `bigseg_membership_lookups_total` by `source`; the wrapper's 1 - store reads / lookups. "+
		"Round trips: bigseg's store reads (one pipeline each); the wrapper's two per store read. "+
		"*CPU "+o.serverCPUs+" busy* is the share of that CPU the server and Redis used: compare CPU per request between servers that both kept it "+
		"near 100%; below, something else was the limit (wrk, the machine's other work), and a server that waits spends more per request.")
	if o.resp {
		fmt.Fprintf(b, " *%s*: a bigseg server of its own in each configuration (its own cache), with `BIGSEG_RESP_ADDR`, "+
			"driven by bench/respload pinned like wrk with %d connections, each lookup an SDK's two SMEMBERS (include, then exclude) "+
			"one after the other on one connection; requests are lookups.", labelRESP, o.connections)
	}
	if len(o.env) > 0 {
		fmt.Fprintf(b, " Every bigseg server also with `%s`.", strings.Join(o.env, " "))
	}
	if len(o.treeEnv) > 0 {
		fmt.Fprintf(b, " This tree's servers also with `%s`.", strings.Join(o.treeEnv, " "))
	}
	if o.baselineEnvs > 1 {
		fmt.Fprintf(b, "Baseline: this tree serving %d environments (BIGSEG_ENVIRONMENTS, env0 the seeded prefix, the others synchronized "+
			"and empty), looked up at /environments/env0/, with a cache bound %d times the configuration's so that env0's share is the same. ",
			o.baselineEnvs, o.baselineEnvs)
	}
	if len(o.baselineEnv) > 0 {
		fmt.Fprintf(b, " The baseline's with `%s`.", strings.Join(o.baselineEnv, " "))
	}
	fmt.Fprintln(b)
}

// writeTable is the main table: one row per system.
func (r *report) writeTable(b *strings.Builder, sums map[*system]*summary) {
	fmt.Fprint(b, "\n| system | requests/s | lookups/s | p50 | p99 | errors | server CPU/request | server CPU/lookup | Redis CPU/request | CPU "+
		r.o.serverCPUs+" busy | round trips/lookup | SMEMBERS/lookup | cache hit ratio |\n|---|"+strings.Repeat("---:|", 12)+"\n")
	for _, s := range r.systems {
		sum := sums[s]
		cpu, cpuL, rt, hit := "n/a", "n/a", "n/a", "n/a"
		if sum.hasServer() {
			cpu, cpuL = fmt.Sprintf("%.1f µs", sum.cpuPerRequest.mean), fmt.Sprintf("%.2f µs", sum.cpuPerLookup.mean)
		}
		if sum.hasCounters() {
			rt, hit = fmt.Sprintf("%.3f", sum.roundTripsPerLookup()), percent(sum.hitRatio())
		}
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %s | %s | %d | %s | %s | %.1f µs | %.0f%% | %s | %.2f | %s |\n",
			s.name, sum.requests.mean, sum.lookups.mean, fmtMillis(sum.p50.mean), fmtMillis(sum.p99.mean), sum.errors,
			cpu, cpuL, sum.redisCPU.mean, 100*sum.core.mean, rt, sum.smembersPerLookup(), hit)
	}
}

// writeRounds shows each round, so that the run-to-run spread is visible.
func (r *report) writeRounds(b *strings.Builder, sums map[*system]*summary) {
	fmt.Fprint(b, "\nEach round: requests/s and server CPU per request (the Redis ceiling: Redis's CPU); "+
		"spread is (max - min) / mean.\n\n| system |")
	for i := 1; i <= r.o.rounds; i++ {
		fmt.Fprintf(b, " round %d |", i)
	}
	fmt.Fprintf(b, " spread of requests/s | spread of CPU/request |\n|---|%s\n", strings.Repeat("---:|", r.o.rounds+2))
	for _, s := range r.systems {
		sum := sums[s]
		fmt.Fprintf(b, "| %s |", s.name)
		for _, m := range sum.runs {
			cpu := m.cpuPerRequest()
			if !sum.hasServer() {
				cpu = m.redisPerRequest()
			}
			fmt.Fprintf(b, " %.0f / %.1f µs |", m.requests(), micros(cpu))
		}
		cpuStat := sum.cpuPerRequest
		if !sum.hasServer() {
			cpuStat = sum.redisCPU
		}
		fmt.Fprintf(b, " %s | %s |\n", percent(sum.requests.spread()), percent(cpuStat.spread()))
	}
}

// find is the summary of a label in a scenario, or nil.
func find(sums map[*system]*summary, label, scenario string) *summary {
	for s, sum := range sums {
		if s.label == label && s.scenario == scenario {
			return sum
		}
	}
	return nil
}

func (r *report) writeTargets(b *strings.Builder, sums map[*system]*summary) {
	f := figures{
		chi: find(sums, labelChi, "hot"), hot: find(sums, "bigseg", "hot"), wrapperHot: find(sums, labelWrapper, "hot"),
		cold: find(sums, "bigseg", "cold"), wrapperCold: find(sums, labelWrapper, "cold"),
		zipf: find(sums, "bigseg", "zipf"), wrapperZipf: find(sums, labelWrapper, "zipf"), batch: find(sums, "bigseg", "batch"),
	}
	for _, sum := range sums {
		f.errors += sum.errors
		f.measuredAnyHTTPScenario = true
	}
	for i := range r.storms {
		if r.storms[i].label == "bigseg" {
			f.storm = &r.storms[i]
		}
	}
	for i := range r.memory {
		if r.memory[i].label == "bigseg" {
			f.memory = &r.memory[i]
		}
	}
	fmt.Fprint(b, "\nThe targets (ratios from this run; in parentheses the range of the rounds' own ratios):\n\n| target | measured | |\n|---|---|---|\n")
	for _, t := range evaluate(f) {
		verdict := "met"
		if !t.met {
			verdict = "**not met**"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", t.what, t.measured, verdict)
	}
}

// writeAB compares bigseg with its baseline, scenario by scenario.
func (r *report) writeAB(b *strings.Builder, sums map[*system]*summary) {
	var base string
	for _, s := range r.systems {
		if s.kind == kindBigseg && s.label != "bigseg" && !s.resp {
			base = s.label
		}
	}
	if base == "" {
		return
	}
	fmt.Fprintf(b, "\nA/B: bigseg (this tree) against %s, measured side by side in every round; ratios are this tree's over the baseline's.\n\n"+
		"| scenario | bigseg CPU/lookup | %s CPU/lookup | CPU ratio | lookups/s ratio | cache hit ratios | |\n|---|---:|---:|---:|---:|---:|---|\n", base, base)
	for _, sc := range []string{"hot", "cold", "zipf", "batch"} {
		cur, old := find(sums, "bigseg", sc), find(sums, base, sc)
		if cur == nil || old == nil {
			continue
		}
		row := compareAB(sc, cur, old)
		hits := "n/a"
		if cur.hasCounters() && old.hasCounters() {
			hits = percent(cur.hitRatio()) + " / " + percent(old.hitRatio())
		}
		fmt.Fprintf(b, "| %s | %.2f µs | %.2f µs | %s | %s | %s | %s |\n", sc, cur.cpuPerLookup.mean, old.cpuPerLookup.mean,
			fmtRatio(row.cpu), fmtRatio(row.lookups), hits, row.verdict)
	}
}

// writeRESP compares bigseg over its Redis-protocol listener with bigseg over HTTP, scenario
// by scenario; ratios are RESP's over HTTP's.
func (r *report) writeRESP(b *strings.Builder, sums map[*system]*summary) {
	var rows []string
	for _, sc := range []string{"hot", "zipf"} {
		over, http := find(sums, labelRESP, sc), find(sums, "bigseg", sc)
		if over == nil || http == nil {
			continue
		}
		hits := "n/a"
		if over.hasCounters() && http.hasCounters() {
			hits = percent(over.hitRatio()) + " / " + percent(http.hitRatio())
		}
		rows = append(rows, fmt.Sprintf("| %s | %.2f µs | %.2f µs | %s | %s | %s |", sc, over.cpuPerLookup.mean, http.cpuPerLookup.mean,
			fmtRatio(pairedRatio(over, http, figCPUPerLookup)), fmtRatio(pairedRatio(over, http, figLookups)), hits))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprint(b, "\nbigseg over RESP against bigseg over HTTP, measured side by side in every round; ratios are RESP's over HTTP's.\n\n"+
		"| scenario | CPU/lookup over RESP | CPU/lookup over HTTP | CPU ratio | lookups/s ratio | cache hit ratios (RESP / HTTP) |\n|---|---:|---:|---:|---:|---:|\n")
	fmt.Fprintln(b, strings.Join(rows, "\n"))
}

func (r *report) writeStormsAndMemory(b *strings.Builder) {
	fmt.Fprintln(b)
	fmt.Fprintf(b, "- Redis: %.0f bytes of `used_memory` per seeded context (the LaunchDarkly layout: an include and/or an exclude set of 3 or 4 refs).\n", r.redisBytesPerContext)
	for _, s := range r.storms {
		fmt.Fprintf(b, "- storm, %s: %d concurrent requests for one uncached key cost %d store read(s); %d answered 200 HEALTHY in %s.\n",
			s.label, s.requests, s.storeReads, s.ok, fmtMillis(s.elapsed.Seconds()*1000))
	}
	for _, m := range r.memory {
		if m.err != nil {
			fmt.Fprintf(b, "- memory, %s: not measured (%v).\n", m.label, strings.SplitN(m.err.Error(), "\n", 2)[0])
			continue
		}
		fmt.Fprintf(b, "- memory, %s: %.0f heap bytes per cached context, 1,000,000 cached (`go test -run '^$' -bench BenchmarkCacheMemory ./segments`).\n", m.label, m.bytes)
	}
}
