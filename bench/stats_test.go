package main

import (
	"math"
	"testing"
	"time"
)

// fakeRun makes a measurement of sys in round: reqPerSec for 6 s, cpuUs of server CPU per
// request, and the given counters.
func fakeRun(sys *system, round int, reqPerSec, cpuUs float64, c counters) measurement {
	total := int64(reqPerSec * 6)
	return measurement{system: sys, round: round,
		wrk:       wrkResult{Total: total, DurationUs: 6_000_000, P50us: 500, P99us: 4000},
		serverCPU: time.Duration(cpuUs*float64(total)) * time.Microsecond,
		redisCPU:  time.Duration(float64(total)) * time.Microsecond, // 1 µs per request
		counters:  c}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

func TestStat(t *testing.T) {
	s := statOf([]float64{10, 12, 14})
	if !near(s.mean, 12) || s.min != 10 || s.max != 14 || !near(s.spread(), 4.0/12) {
		t.Errorf("statOf = %+v, spread %g", s, s.spread())
	}
	if (stat{}).spread() != 0 || statOf(nil) != (stat{}) {
		t.Error("an empty stat should be zero")
	}
}

func TestSummarize(t *testing.T) {
	proc := &proc{}
	batch := &system{name: "batch", kind: kindBigseg, proc: proc, perRequest: 100}
	other := &system{name: "other", proc: proc, perRequest: 1}
	runs := []measurement{
		fakeRun(batch, 1, 2000, 300, counters{lookups: 1_200_000, storeLookups: 1_200_000, roundTrips: 12_000, smembers: 2_400_000}),
		fakeRun(other, 1, 50_000, 10, counters{}),
		fakeRun(batch, 2, 3000, 200, counters{lookups: 1_800_000, storeLookups: 1_800_000, roundTrips: 18_000, smembers: 3_600_000}),
	}
	s := summarize(batch, runs)
	if len(s.runs) != 2 {
		t.Fatalf("%d runs, want 2", len(s.runs))
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"requests/s", s.requests.mean, 2500},
		{"lookups/s", s.lookups.mean, 250_000},
		{"CPU per request", s.cpuPerRequest.mean, 250},
		{"CPU per lookup", s.cpuPerLookup.mean, 2.5},
		{"Redis CPU per request", s.redisCPU.mean, 1},
		{"core", s.core.mean, (2000*6*301 + 3000*6*201) / 2 / 6e6},
		{"p99 ms", s.p99.mean, 4},
		{"hit ratio", s.hitRatio(), 0},
		{"round trips per lookup", s.roundTripsPerLookup(), 0.01},
		{"SMEMBERS per lookup", s.smembersPerLookup(), 2},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
		}
	}
}

func TestPairedRatio(t *testing.T) {
	a := &system{name: "a", proc: &proc{}, perRequest: 1}
	b := &system{name: "b", proc: &proc{}, perRequest: 1}
	runs := []measurement{fakeRun(a, 1, 100, 20, counters{}), fakeRun(b, 1, 100, 10, counters{}),
		fakeRun(a, 2, 100, 30, counters{}), fakeRun(b, 2, 100, 20, counters{})}
	sa, sb := summarize(a, runs), summarize(b, runs)
	r := pairedRatio(&sa, &sb, figCPUPerRequest)
	// Means 25 and 15; rounds 2.0 and 1.5.
	if !r.ok || !near(r.value, 25.0/15) || !near(r.min, 1.5) || !near(r.max, 2) {
		t.Errorf("pairedRatio = %+v", r)
	}
	if r := pairedRatio(&sa, nil, figCPUPerRequest); r.ok {
		t.Error("a ratio to a system not measured should not be ok")
	}
}
