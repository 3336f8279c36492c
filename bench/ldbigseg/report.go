package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

type report struct {
	config     config
	took       time.Duration
	affinity   string
	loadBefore string
	gomaxprocs int
	sections   []reportSection
}

type reportSection struct {
	mode string
	rows []reportRow
}

type reportRow struct {
	name   string
	direct bool
	runs   []result
}

// sum adds up the row's runs (the latencies of all of them, sorted).
func (r reportRow) sum() result {
	var total result
	for _, x := range r.runs {
		total.evals += x.evals
		total.wrong += x.wrong
		total.elapsed += x.elapsed
		total.clientCPU += x.clientCPU
		total.serverCPU += x.serverCPU
		total.lookups += x.lookups
		total.storeErr += x.storeErr
		total.latencies = append(total.latencies, x.latencies...)
	}
	slices.Sort(total.latencies)
	return total
}

// rates are the row's evaluations/s, round by round.
func (r reportRow) rates() []float64 {
	var out []float64
	for _, x := range r.runs {
		out = append(out, x.rate())
	}
	return out
}

// ratios are the row's rates over the baseline's, round by round: each pair was measured in
// the same round, close in time, so a drift of the machine's load moves both.
func (r reportRow) ratios(base reportRow) []float64 {
	var out []float64
	for i, x := range r.runs {
		if i < len(base.runs) {
			out = append(out, x.rate()/base.runs[i].rate())
		}
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (rep report) print(w io.Writer) {
	c := rep.config
	host, _ := os.Hostname()
	fmt.Fprintf(w, "## Run of %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "Machine: %s, %d CPUs, %s; load average %s before the run, %s after (the machine is shared). Redis (private) and bigseg pinned to CPU %d; the benchmark process (the SDK client and %d evaluating goroutines) to CPU %s, GOMAXPROCS %d. ",
		host, onlineCPUs(), runtime.Version(), rep.loadBefore, loadAverage(), c.serverCPU, c.concurrency, rep.affinity, rep.gomaxprocs)
	fmt.Fprintf(w, "Command: `bench/ldbigseg/run%s`. %d contexts in Redis, evaluated in a Zipf(s=%.2g) draw over them; each system measured %d times for %v after a %v warm-up with a new SDK client, alternating (every other round in reverse order); rates are medians over the rounds, ratios medians of the rounds' ratios, CPU times and latencies over all rounds. Took %v.\n\n",
		shownArgs(), c.contexts, c.zipf, c.rounds, c.duration, c.warmup, rep.took.Round(time.Second))
	for _, sec := range rep.sections {
		var base reportRow
		for _, row := range sec.rows {
			if row.direct {
				base = row
			}
		}
		fmt.Fprintf(w, "### %s\n\n", sec.mode)
		fmt.Fprintln(w, "| system | evaluations/s (median; min-max) | vs Redis direct, ldredis's reads (median of per-round ratios) | store lookups per evaluation | lookup p50 | lookup p99 | CPU per evaluation: SDK process | Redis + bigseg | total | wrong values, store errors |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, row := range sec.rows {
			t := row.sum()
			evals := float64(max(t.evals, 1))
			rates := row.rates()
			fmt.Fprintf(w, "| %s | %.0f (%.0f-%.0f) | %.2f | %.3f | %s | %s | %s | %s | %s | %d, %d |\n",
				row.name, median(rates), slices.Min(rates), slices.Max(rates), median(row.ratios(base)),
				float64(t.lookups)/evals,
				percentile(t.latencies, 0.50), percentile(t.latencies, 0.99),
				perEval(t.clientCPU, evals), perEval(t.serverCPU, evals), perEval(t.clientCPU+t.serverCPU, evals),
				t.wrong, t.storeErr)
		}
		fmt.Fprintln(w)
		fmt.Fprint(w, "| evaluations/s |")
		for i := range sec.rows[0].runs {
			fmt.Fprintf(w, " round %d |", i+1)
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "|---|"+strings.Repeat("---:|", len(sec.rows[0].runs)))
		for _, row := range sec.rows {
			fmt.Fprintf(w, "| %s |", row.name)
			for _, r := range row.runs {
				fmt.Fprintf(w, " %.0f |", r.rate())
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
}

func percentile(sorted []time.Duration, q float64) string {
	if len(sorted) == 0 {
		return "n/a"
	}
	return micros(sorted[int(q*float64(len(sorted)-1))])
}

func perEval(d time.Duration, evals float64) string {
	return micros(time.Duration(float64(d) / evals))
}

func micros(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us >= 1000:
		return fmt.Sprintf("%.2f ms", us/1000)
	case us >= 10:
		return fmt.Sprintf("%.0f µs", us)
	default:
		return fmt.Sprintf("%.1f µs", us)
	}
}

// shownArgs is the command line as bench/ldbigseg/run took it (without the -server it adds).
func shownArgs() string {
	var out []string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-server" || args[i] == "--server":
			i++
		case strings.HasPrefix(args[i], "-server=") || strings.HasPrefix(args[i], "--server="):
		default:
			out = append(out, args[i])
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " " + strings.Join(out, " ")
}

// onlineCPUs counts the machine's CPUs (runtime.NumCPU counts only those this process may use).
func onlineCPUs() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.NumCPU()
	}
	return strings.Count(string(b), "\nprocessor") + strings.Count(string(b[:min(len(b), 9)]), "processor")
}

// loadAverage is the 1-minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}
