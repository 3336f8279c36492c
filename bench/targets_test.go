package main

import (
	"strings"
	"testing"
	"time"
)

// sums makes one-round summaries of systems with the given CPU per request, requests/s and
// counters.
type fake struct {
	cpuUs, reqPerSec float64
	perRequest       int
	c                counters
}

func (f fake) summary() *summary {
	sys := &system{name: "x", kind: kindBigseg, proc: &proc{}, perRequest: max(f.perRequest, 1)}
	s := summarize(sys, []measurement{fakeRun(sys, 1, f.reqPerSec, f.cpuUs, f.c)})
	return &s
}

func TestEvaluate(t *testing.T) {
	coldCounters := counters{lookups: 100_000, storeLookups: 100_000, roundTrips: 30_000, smembers: 200_000}
	f := figures{
		chi: fake{cpuUs: 12.7, reqPerSec: 70_000}.summary(), hot: fake{cpuUs: 13.97, reqPerSec: 65_000}.summary(),
		wrapperHot: fake{cpuUs: 16, reqPerSec: 60_000}.summary(),
		cold:       fake{cpuUs: 39, reqPerSec: 20_000, c: coldCounters}.summary(),
		// 78 / 39 = 2.0 (met); 20,000 / 10,500 < 2 (not met)
		wrapperCold: fake{cpuUs: 78, reqPerSec: 10_500}.summary(),
		zipf:        fake{cpuUs: 27, reqPerSec: 45_000, c: counters{lookups: 100, storeLookups: 20}}.summary(),
		wrapperZipf: fake{cpuUs: 32, reqPerSec: 30_000, c: counters{lookups: 100, storeLookups: 45}}.summary(),
		batch: fake{cpuUs: 300, reqPerSec: 1500, perRequest: 100,
			c: counters{lookups: 900_000, storeLookups: 900_000, roundTrips: 9000, smembers: 1_800_000}}.summary(),
		storm:                   &stormResult{requests: 1000, ok: 1000, storeReads: 2, elapsed: 30 * time.Millisecond},
		memory:                  &memoryResult{bytes: 181},
		measuredAnyHTTPScenario: true,
	}
	want := map[string]bool{
		"hot: CPU per request <= 1.10 x bare chi's":                       true,
		"hot: CPU per request below the LaunchDarkly wrapper's":           true,
		"cold: the wrapper's CPU per lookup >= 2.0 x bigseg's":            true,
		"cold: requests/s >= 2.0 x the wrapper's":                         false,
		"zipf: requests/s >= 1.5 x the wrapper's, both at defaults":       true,
		"cold: one Redis round trip per lookup":                           true,
		"batch: lookups/s >= 5 x cold's":                                  true,
		"batch: one Redis round trip per batch":                           true,
		"storm: 1 store read for 1000 concurrent requests, all answered":  false,
		"memory: <= 250 heap bytes per cached context (1,000,000 cached)": true,
		"no errors (every system, every round)":                           true,
	}
	got := evaluate(f)
	if m := got[0].measured; strings.Contains(m, "compare with care") {
		t.Errorf("hot and bare chi were saturated, but: %s", m)
	}
	if len(got) != len(want) {
		t.Errorf("%d targets, want %d: %+v", len(got), len(want), got)
	}
	for _, tg := range got {
		met, ok := want[tg.what]
		if !ok {
			t.Errorf("unexpected target %q", tg.what)
			continue
		}
		if tg.met != met {
			t.Errorf("%s: met = %v, want %v (%s)", tg.what, tg.met, met, tg.measured)
		}
		if strings.HasPrefix(tg.what, "zipf") && !strings.Contains(tg.measured, "cache hit ratio 80.0% against 55.0%") {
			t.Errorf("zipf target does not show both hit ratios: %s", tg.measured)
		}
	}
}

func TestEvaluateSaysWhenRoundsDisagree(t *testing.T) {
	mk := func(cpus ...float64) *summary {
		sys := &system{proc: &proc{}, perRequest: 1}
		var runs []measurement
		for i, c := range cpus {
			runs = append(runs, fakeRun(sys, i+1, 1000, c, counters{}))
		}
		s := summarize(sys, runs)
		return &s
	}
	// Rounds 1.05 and 1.20, 1.125 on the means: not met, and the rounds disagree.
	got := evaluate(figures{hot: mk(10.5, 12), chi: mk(10, 10)})
	if len(got) != 1 || got[0].met || !strings.Contains(got[0].measured, "the rounds disagree") {
		t.Errorf("evaluate = %+v", got)
	}
	// 1,000 requests/s of 10 µs keep a CPU 1% busy: neither server was saturated.
	if !strings.Contains(got[0].measured, "compare with care") {
		t.Errorf("evaluate does not say the servers were not saturated: %s", got[0].measured)
	}
	got = evaluate(figures{hot: mk(10.5, 10.6), chi: mk(10, 10)})
	if len(got) != 1 || !got[0].met || strings.Contains(got[0].measured, "disagree") {
		t.Errorf("evaluate = %+v", got)
	}
}

func TestEvaluateSkipsWhatWasNotMeasured(t *testing.T) {
	got := evaluate(figures{hot: fake{cpuUs: 14, reqPerSec: 1}.summary()})
	if len(got) != 0 {
		t.Errorf("targets without their figures: %+v", got)
	}
}

func TestCompareAB(t *testing.T) {
	mk := func(cpus ...float64) *summary {
		sys := &system{proc: &proc{}, perRequest: 1}
		var runs []measurement
		for i, c := range cpus {
			runs = append(runs, fakeRun(sys, i+1, 1000, c, counters{}))
		}
		s := summarize(sys, runs)
		return &s
	}
	tests := []struct {
		name          string
		current, base *summary
		want          string
	}{
		{"less CPU in every round, beyond the spread", mk(10, 11), mk(12, 12), "12.5% less CPU"},
		{"more CPU in every round, beyond the spread", mk(13, 14), mk(12, 12), "12.5% more CPU"},
		{"rounds disagree", mk(11, 13), mk(12, 12), "within the run-to-run spread"},
		{"less in every round, but within the spread", mk(10, 12), mk(10.5, 12.5), "within the run-to-run spread"},
		{"one round", mk(10), mk(12), "one round"},
		{"baseline not measured", mk(11), nil, "not measured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := compareAB("hot", tt.current, tt.base).verdict; !strings.Contains(got, tt.want) {
				t.Errorf("verdict %q, want it to say %q", got, tt.want)
			}
		})
	}
}
