package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// report is the benchmark's output, Markdown for BENCHMARKS.md.
type report struct {
	config  config
	results map[runKey]measured
	took    time.Duration
	load    string
}

func (r report) print(w io.Writer) {
	c := r.config
	fmt.Fprintf(w, "%d evaluations a phase (cold: new SDK instances and, through bigseg, a new bigseg; warm: as many again on them), contexts drawn uniformly, %d goroutines; moto_server behind a counting proxy; took %v, load average %s at the start\n\n",
		c.evals, c.concurrency, r.took.Round(time.Second), r.load)
	fmt.Fprintln(w, "Lookups' DynamoDB calls and read units (RCU, strongly consistent: 1 an item) per 1,000 evaluations; status polls apart, below.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| SDK instances | contexts | SDK cache | phase | SDK → DynamoDB: calls | RCU | SDK → bigseg → DynamoDB: calls | RCU | RCU ratio (direct / bigseg) |")
	fmt.Fprintln(w, "|---:|---:|---|---|---:|---:|---:|---:|---:|")
	for _, n := range c.instances {
		for _, size := range c.contexts {
			for mi, mode := range cacheModes {
				for p, phase := range phases {
					d := r.results[runKey{n, size, mi, viaDynamo, p}]
					b := r.results[runKey{n, size, mi, viaBigseg, p}]
					dr, br := per1000(d.n.membershipRCU, d.evals), per1000(b.n.membershipRCU, b.evals)
					fmt.Fprintf(w, "| %d | %d | %s | %s | %.0f | %.0f | %.0f | %.0f | %s |\n", n, size, mode.name, phase,
						per1000(float64(d.n.lookupCalls), d.evals), dr, per1000(float64(b.n.lookupCalls), b.evals), br, ratio(dr, br))
				}
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Metadata items read (status), on average a run, by phase: an SDK instance reads it at its first evaluations (once for each goroutine evaluating before it has a status, v7.0.0 merging none) and then every 5 s (its StatusPollInterval); bigseg reads it before it is ready and every 5 s (BIGSEG_STATUS_POLL_INTERVAL), whatever the SDKs behind it.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| SDK instances | phase | SDK → DynamoDB | SDK → bigseg → DynamoDB |")
	fmt.Fprintln(w, "|---:|---|---:|---:|")
	for _, n := range c.instances {
		for p, phase := range phases {
			var items [2]float64
			var runs [2]int
			for k, m := range r.results {
				if k.instances != n || k.phase != p {
					continue
				}
				i := 0
				if k.way == viaBigseg {
					i = 1
				}
				items[i] += m.n.metadata
				runs[i]++
			}
			fmt.Fprintf(w, "| %d | %s | %.1f | %.1f |\n", n, phase, items[0]/float64(max(runs[0], 1)), items[1]/float64(max(runs[1], 1)))
		}
	}
}

func ratio(a, b float64) string {
	if b == 0 {
		if a == 0 {
			return "="
		}
		return "∞ (bigseg read none)"
	}
	return fmt.Sprintf("%.1f", a/b)
}

// loadAverage is /proc/loadavg's first three figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
