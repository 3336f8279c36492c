package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The benchmark's counts of Redis commands leave INFO, its own reading of them, out.
func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_smembers:calls=200,usec=300,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_ping:calls=100,usec=50,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n"
	got, err := parseCommandStats(info)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(commandCounts{"smembers": 200, "ping": 100}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	before := commandCounts{"smembers": 150, "ping": 100}
	if d := got.sub(before); d.total() != 50 || d["ping"] != 0 {
		t.Errorf("sub: %v", d)
	}
}

func TestSumRESPCommands(t *testing.T) {
	exposition := "# HELP bigseg_resp_commands_total Commands answered.\n# TYPE bigseg_resp_commands_total counter\n" +
		"bigseg_resp_commands_total{command=\"get\",result=\"ok\"} 12\n" +
		"bigseg_resp_commands_total{command=\"smembers\",result=\"ok\"} 2.5e+06\n" +
		"bigseg_resp_commands_total{command=\"smembers\",result=\"error\"} 0\n" +
		"bigseg_resp_command_duration_seconds_count{command=\"get\"} 12\n"
	got, err := sumRESPCommands(exposition)
	if err != nil || got != 2_500_012 {
		t.Errorf("%v, %v; want 2500012", got, err)
	}
}

func TestMedianAndRatio(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3 = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 4 = %v", m)
	}
	a := []result{{round: 1, evals: 10, clientCPU: 20}, {round: 2, evals: 10, clientCPU: 40}}
	b := []result{{round: 2, evals: 10, clientCPU: 20}, {round: 1, evals: 10, clientCPU: 10}}
	if got := ratioOf(a, b, result.clientCPUPerEval); got != "2.00 (2.00-2.00)" {
		t.Errorf("ratioOf: %s, want the rounds paired", got)
	}
}
