package main

import (
	"io"
	"net/http"
	"slices"
	"testing"
)

func TestParseSummary(t *testing.T) {
	out := []byte("Running 6s test @ http://127.0.0.1:1\n  1 threads and 64 connections\n" +
		`BENCHJSON {"total":600000,"duration_us":6000000,"p50_us":610,"p99_us":5500,"non2xx":3,"errors":1}` + "\nRequests/sec: 100000\n")
	r, err := parseSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{Total: 600_000, DurationUs: 6_000_000, P50us: 610, P99us: 5500, Non2xx: 3, Errors: 1}
	if r != want || r.perSecond() != 100_000 {
		t.Errorf("parseSummary = %+v (%g/s), want %+v", r, r.perSecond(), want)
	}
	for _, bad := range []string{"no summary", "BENCHJSON {not json", `BENCHJSON {"total":0,"duration_us":6000000}`} {
		if _, err := parseSummary([]byte(bad)); err == nil {
			t.Errorf("parseSummary(%q) did not fail", bad)
		}
	}
}

func TestMirroredHeaders(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"},
		"Date": {"Mon, 30 Nov 2026 12:00:00 GMT"}, "Content-Length": {"205"}, "Vary": {"A", "B"}}
	got := mirroredHeaders(h)
	want := []string{"Cache-Control: no-store", "Content-Type: application/json", "Vary: A", "Vary: B"}
	if !slices.Equal(got, want) {
		t.Errorf("mirroredHeaders = %q, want %q", got, want)
	}
}

func TestConfigsOfScenarios(t *testing.T) {
	tests := []struct {
		scenarios     []string
		wrapper       bool
		configs       []string
		wrapperConfig []string
	}{
		{allScenarios, true, []string{"hot", "off", "defaults"}, []string{"hot", "off", "defaults"}},
		{[]string{"hot", "cold"}, true, []string{"hot", "off"}, []string{"hot", "off"}},
		{[]string{"batch", "storm"}, true, []string{"off", "defaults"}, nil},
		{[]string{"zipf"}, false, []string{"defaults"}, nil},
		{[]string{"memory", "redis"}, true, nil, nil},
	}
	for _, tt := range tests {
		b := &bench{o: options{scenarios: map[string]bool{}, wrapper: tt.wrapper}}
		for _, sc := range tt.scenarios {
			b.o.scenarios[sc] = true
		}
		if got := b.configs(); !slices.Equal(got, tt.configs) {
			t.Errorf("%v: configs %v, want %v", tt.scenarios, got, tt.configs)
		}
		var wrapper []string
		for _, c := range []string{"hot", "off", "defaults"} {
			if b.wrapperRuns(c) {
				wrapper = append(wrapper, c)
			}
		}
		if !slices.Equal(wrapper, tt.wrapperConfig) {
			t.Errorf("%v: the wrapper runs in %v, want %v", tt.scenarios, wrapper, tt.wrapperConfig)
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-scenarios", "hot,cold", "-baseline", "main", "-env", "A=1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.scenarios["hot"] || !o.scenarios["cold"] || o.scenarios["zipf"] || o.baseline != "main" || !slices.Equal(o.env, []string{"A=1"}) {
		t.Errorf("parseFlags = %+v", o)
	}
	for _, bad := range [][]string{{"-scenarios", "hot,lukewarm"}, {"-env", "NOEQUALS"}, {"-rounds", "0"},
		{"-baseline", "main", "-baseline-environments", "100"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) did not fail", bad)
		}
	}
}
