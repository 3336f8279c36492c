package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// report is a run's results as markdown, for BENCHMARKS.md.
type report struct {
	config     config
	took       time.Duration
	load       string // load average before the run
	affinity   string
	gomaxprocs int
	systems    []system
	results    map[runKey][]result
}

func (r report) print(w io.Writer) {
	c := r.config
	population := fmt.Sprintf("Zipf(%g)", c.zipf)
	if c.zipf == 0 {
		population = "uniformly"
	}
	fmt.Fprintf(w, "## sdkresp: %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "The SDK process on CPUs %s (GOMAXPROCS %d), Redis and bigseg on CPU %d; load average before: %s; took %s. "+
		"%d contexts (a third included in the segment, a third excluded, a third in none), drawn %s by %d goroutines; "+
		"per system, mode and round: a new SDK client, %s of warm-up, %s measured; %d rounds, every other in reverse order. "+
		"Figures are medians of the rounds, spreads (max - min) / mean, ratios the medians of the rounds' own ratios (their range in parentheses).\n",
		r.affinity, r.gomaxprocs, c.serverCPU, r.load, r.took.Round(time.Second), c.contexts, population, c.concurrency,
		c.warmup, c.duration, c.rounds)
	for m, md := range modes {
		fmt.Fprintf(w, "\n### %s\n\n", md.name)
		fmt.Fprint(w, "| system | evaluations/s | SDK CPU/evaluation | over ldredis -> Redis | store lookups/evaluation | commands to what the SDK dials/evaluation | backing Redis commands/evaluation | by command | Redis + bigseg CPU/evaluation | store errors |\n")
		fmt.Fprint(w, "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
		base := r.results[runKey{0, m}]
		for s, sys := range r.systems {
			runs := r.results[runKey{s, m}]
			cpu := figure(runs, result.clientCPUPerEval)
			ratio := "1"
			if !sys.direct {
				ratio = ratioOf(runs, base, result.clientCPUPerEval)
			}
			dialled := figure(runs, result.redisPerEval)
			if sys.bigseg != nil {
				dialled = figure(runs, func(x result) float64 { return x.perEval(x.resp) })
			}
			var errs int64
			for _, x := range runs {
				errs += x.storeErrors
			}
			fmt.Fprintf(w, "| %s | %.0f (%s) | %.2f µs (%s) | %s | %.3f | %.3f | %.4f | %s | %.2f µs | %d |\n", sys.name,
				median(figures(runs, result.rate)), spread(figures(runs, result.rate)), median(cpu), spread(cpu), ratio,
				median(figures(runs, result.lookupsPerEval)), median(dialled), median(figures(runs, result.redisPerEval)),
				byCommand(runs), median(figures(runs, result.serverCPUPerEval)), errs)
		}
		fmt.Fprint(w, "\nEach round: evaluations/s, SDK CPU per evaluation, backing Redis commands per evaluation, the share of its CPU the SDK process used.\n\n| system |")
		for i := 1; i <= c.rounds; i++ {
			fmt.Fprintf(w, " round %d |", i)
		}
		fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", c.rounds))
		for s, sys := range r.systems {
			fmt.Fprintf(w, "| %s |", sys.name)
			for _, x := range r.results[runKey{s, m}] {
				fmt.Fprintf(w, " %.0f / %.2f µs / %.4f / %.0f%% |", x.rate(), x.clientCPUPerEval(), x.redisPerEval(), 100*x.busy())
			}
			fmt.Fprintln(w)
		}
	}
}

func figures(runs []result, f func(result) float64) []float64 {
	out := make([]float64, len(runs))
	for i, x := range runs {
		out[i] = f(x)
	}
	return out
}

func figure(runs []result, f func(result) float64) []float64 { return figures(runs, f) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func spread(xs []float64) string {
	if len(xs) == 0 {
		return "n/a"
	}
	mean := 0.0
	for _, x := range xs {
		mean += x / float64(len(xs))
	}
	if mean == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.0f%%", 100*(slices.Max(xs)-slices.Min(xs))/mean)
}

// ratioOf is the median of the rounds' ratios of a figure, a's over b's, and their range.
func ratioOf(a, b []result, f func(result) float64) string {
	var rs []float64
	for _, x := range a {
		for _, y := range b {
			if x.round == y.round && f(y) != 0 {
				rs = append(rs, f(x)/f(y))
			}
		}
	}
	if len(rs) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f (%.2f-%.2f)", median(rs), slices.Min(rs), slices.Max(rs))
}

// byCommand is the backing Redis's commands per evaluation by command, over all rounds.
func byCommand(runs []result) string {
	sum := commandCounts{}
	var evals int64
	for _, x := range runs {
		for k, v := range x.redis {
			sum[k] += v
		}
		evals += x.evals
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(sum)) {
		parts = append(parts, fmt.Sprintf("%s %.4f", strings.ToUpper(k), sum[k]/float64(max(evals, 1))))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
