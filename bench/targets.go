package main

import (
	"fmt"
	"math"
	"strings"
)

// saturatedBelow is the share of the server CPU under which a server was not the limit of
// its own measurement.
const saturatedBelow = 0.9

// figures are what the targets in BENCHMARKS.md compare; nil where a system was not measured.
type figures struct {
	chi, hot, wrapperHot    *summary
	cold, wrapperCold       *summary
	zipf, wrapperZipf       *summary
	batch                   *summary
	storm                   *stormResult
	memory                  *memoryResult
	errors                  int64 // over every system
	measuredAnyHTTPScenario bool
}

// target is one line of the targets table.
type target struct {
	what, measured string
	met            bool
}

// evaluate checks every target whose figures were measured.
func evaluate(f figures) []target {
	var out []target
	add := func(what string, met bool, format string, args ...any) {
		out = append(out, target{what: what, measured: fmt.Sprintf(format, args...), met: met})
	}
	out = append(out, ratioTargets(f)...)
	out = append(out, roundTripTargets(f)...)
	if f.storm != nil {
		add(fmt.Sprintf("storm: 1 store read for %d concurrent requests, all answered", f.storm.requests),
			f.storm.storeReads == 1 && f.storm.ok == f.storm.requests, "%d store read(s), %d of %d answered 200 HEALTHY in %s",
			f.storm.storeReads, f.storm.ok, f.storm.requests, fmtMillis(f.storm.elapsed.Seconds()*1000))
	}
	if f.memory != nil && f.memory.err == nil {
		add("memory: <= 250 heap bytes per cached context (1,000,000 cached)", f.memory.bytes <= 250, "%.0f bytes", f.memory.bytes)
	}
	if f.measuredAnyHTTPScenario {
		add("no errors (every system, every round)", f.errors == 0, "%d", f.errors)
	}
	return out
}

// ratioTargets compare bigseg with the ceiling and the wrapper. A ratio is judged on the
// means; where the rounds' own ratios fall on both sides of the bound, the line says so.
func ratioTargets(f figures) []target {
	var out []target
	add := func(what string, r ratio, pass func(float64) bool, format string, args ...any) {
		if !r.ok {
			return
		}
		t := target{what: what, measured: fmtRatio(r) + " x " + fmt.Sprintf(format, args...), met: pass(r.value)}
		if pass(r.min) != pass(r.max) {
			t.measured += "; the rounds disagree"
		}
		out = append(out, t)
	}
	// CPU per request is comparable between servers that both kept their CPU busy: one that
	// was not (the load generator or the machine's other work was the limit) spends more per
	// request, since each wake-up finds fewer requests.
	saturated := func(sums ...*summary) string {
		var notes []string
		for _, s := range sums {
			if s.core.mean < saturatedBelow {
				notes = append(notes, fmt.Sprintf("%s kept the server CPU only %.0f%% busy", s.sys.name, 100*s.core.mean))
			}
		}
		if len(notes) == 0 {
			return ""
		}
		return "; " + strings.Join(notes, ", ") + ": compare with care"
	}
	atMost := func(bound float64) func(float64) bool { return func(x float64) bool { return x <= bound } }
	atLeast := func(bound float64) func(float64) bool { return func(x float64) bool { return x >= bound } }
	if r := pairedRatio(f.hot, f.chi, figCPUPerRequest); r.ok {
		add("hot: CPU per request <= 1.10 x bare chi's", r, atMost(1.10), "(%.1f µs against %.1f µs)%s",
			f.hot.cpuPerRequest.mean, f.chi.cpuPerRequest.mean, saturated(f.hot, f.chi))
	}
	if r := pairedRatio(f.hot, f.wrapperHot, figCPUPerRequest); r.ok {
		add("hot: CPU per request below the LaunchDarkly wrapper's", r, func(x float64) bool { return x < 1 },
			"(%.1f µs against %.1f µs)%s", f.hot.cpuPerRequest.mean, f.wrapperHot.cpuPerRequest.mean, saturated(f.hot, f.wrapperHot))
	}
	if r := pairedRatio(f.wrapperCold, f.cold, figCPUPerLookup); r.ok {
		add("cold: the wrapper's CPU per lookup >= 2.0 x bigseg's", r, atLeast(2), "(%.1f µs against %.1f µs)%s",
			f.wrapperCold.cpuPerLookup.mean, f.cold.cpuPerLookup.mean, saturated(f.cold, f.wrapperCold))
	}
	if r := pairedRatio(f.cold, f.wrapperCold, figRequests); r.ok {
		add("cold: requests/s >= 2.0 x the wrapper's", r, atLeast(2), "(%.0f against %.0f)",
			f.cold.requests.mean, f.wrapperCold.requests.mean)
	}
	if r := pairedRatio(f.zipf, f.wrapperZipf, figRequests); r.ok {
		add("zipf: requests/s >= 1.5 x the wrapper's, both at defaults", r, atLeast(1.5),
			"(%.0f against %.0f); cache hit ratio %s against %s", f.zipf.requests.mean, f.wrapperZipf.requests.mean,
			percent(f.zipf.hitRatio()), percent(f.wrapperZipf.hitRatio()))
	}
	return out
}

// roundTripTargets check that a cold lookup costs one Redis round trip and a batch one in all.
func roundTripTargets(f figures) []target {
	var out []target
	if f.cold != nil && f.cold.hasCounters() {
		rt, sm := f.cold.roundTripsPerLookup(), f.cold.smembersPerLookup()
		out = append(out, target{what: "cold: one Redis round trip per lookup",
			measured: fmt.Sprintf("%.3f round trips (pipelines) and %.2f SMEMBERS per lookup", rt, sm),
			met:      rt <= 1.0001 && math.Abs(sm-2) < 0.02})
	}
	if r := pairedRatio(f.batch, f.cold, figLookups); r.ok {
		out = append(out, target{what: "batch: lookups/s >= 5 x cold's",
			measured: fmt.Sprintf("%s x (%.0f against %.0f)", fmtRatio(r), f.batch.lookups.mean, f.cold.lookups.mean),
			met:      r.value >= 5})
	}
	if f.batch != nil && f.batch.hasCounters() {
		perBatch := f.batch.roundTripsPerLookup() * batchSize
		out = append(out, target{what: "batch: one Redis round trip per batch",
			measured: fmt.Sprintf("%.3f round trips and %.1f SMEMBERS per batch of %d", perBatch, f.batch.smembersPerLookup()*batchSize, batchSize),
			met:      math.Abs(perBatch-1) < 0.001})
	}
	return out
}

// abRow compares bigseg with its baseline in one scenario.
type abRow struct {
	scenario      string
	cpu, lookups  ratio // current / baseline
	current, base *summary
	verdict       string
}

// compareAB compares a scenario's current and baseline bigseg on CPU per lookup. A
// difference counts only if every round agrees on its direction and it is larger than the
// run-to-run spread of either side's CPU per lookup.
func compareAB(scenario string, current, base *summary) abRow {
	row := abRow{scenario: scenario, current: current, base: base,
		cpu: pairedRatio(current, base, figCPUPerLookup), lookups: pairedRatio(current, base, figLookups)}
	if !row.cpu.ok {
		row.verdict = "not measured"
		return row
	}
	spread := math.Max(current.cpuPerLookup.spread(), base.cpuPerLookup.spread())
	switch {
	case row.cpu.rounds < 2:
		row.verdict = "one round: no spread to judge by"
	case row.cpu.max < 1 && 1-row.cpu.value > spread:
		row.verdict = fmt.Sprintf("**%.1f%% less CPU per lookup**, beyond the spread (%s)", 100*(1-row.cpu.value), percent(spread))
	case row.cpu.min > 1 && row.cpu.value-1 > spread:
		row.verdict = fmt.Sprintf("**%.1f%% more CPU per lookup**, beyond the spread (%s)", 100*(row.cpu.value-1), percent(spread))
	default:
		row.verdict = fmt.Sprintf("within the run-to-run spread (%s)", percent(spread))
	}
	return row
}

func fmtRatio(r ratio) string {
	if r.min == r.max {
		return fmt.Sprintf("%.2f", r.value)
	}
	return fmt.Sprintf("%.2f (rounds %.2f-%.2f)", r.value, r.min, r.max)
}

func percent(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func fmtMillis(ms float64) string { return fmt.Sprintf("%.2f ms", ms) }
