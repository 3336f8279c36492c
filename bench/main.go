// Command bench measures bigseg on the machine it runs on against, in the same run, the
// ceilings of that machine (a bare chi server with bigseg's body and headers; a go-redis
// client doing bigseg's reads) and what a user would build instead (LaunchDarkly's SDK
// Big Segment store wrapper behind chi, bench/ldwrapper). Every server under test and the
// run's private Redis run on one CPU, wrk on another, and the figure that counts is the
// server's CPU time per request (from /proc): on a shared machine, requests per second mostly
// measure how the load generator and the server fight for CPU. See BENCHMARKS.md.
//
//	bench/run [-scenarios hot,cold,zipf,batch,redis,storm,memory] [-rounds 3] [-duration 6s]
//	          [-baseline REV | -baseline-environments N] [-env NAME=VALUE] [-baseline-env NAME=VALUE]
//	          [-profile] [-resp]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	contexts     int
	duration     time.Duration
	warmup       time.Duration // Zipf traffic before each Zipf measurement
	rounds       int
	connections  int
	threads      int
	scenarios    map[string]bool
	wrapper      bool
	resp         bool // also bigseg over its Redis-protocol listener (hot, zipf)
	profile      bool
	outDir       string
	env          []string // extra environment of every bigseg server
	baseline     string   // git revision to measure beside the current tree
	baselineEnv  []string // extra environment of the baseline's servers, after env
	treeEnv      []string // extra environment of the current tree's servers, after env
	baselineEnvs int      // environments the baseline serves (the current tree's binary), if more than 1
	serverCPUs   string   // where the servers under test and Redis run
	clientCPUs   string   // where wrk runs
	args         []string // the command line, for the report
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{scenarios: map[string]bool{}, args: args}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.contexts, "contexts", 1_000_000, "contexts to seed")
	fs.DurationVar(&o.duration, "duration", 6*time.Second, "length of each measurement (whole seconds)")
	fs.DurationVar(&o.warmup, "warmup", 10*time.Second, "Zipf traffic before each Zipf measurement (two cache TTLs)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds, each measuring every system once, alternating")
	fs.IntVar(&o.connections, "connections", 64, "wrk connections (and Redis-ceiling workers)")
	fs.IntVar(&o.threads, "threads", 1, "wrk threads")
	scenarios := fs.String("scenarios", strings.Join(allScenarios, ","), "scenarios to run")
	fs.BoolVar(&o.wrapper, "wrapper", true, "measure the LaunchDarkly SDK wrapper too (hot, cold, zipf)")
	fs.BoolVar(&o.resp, "resp", false, "also measure bigseg over its Redis-protocol listener (hot, zipf), driven by bench/respload: an SDK's two SMEMBERS per lookup")
	fs.BoolVar(&o.profile, "profile", false, "after the rounds, take CPU profiles of bigseg and the wrapper in each scenario")
	fs.StringVar(&o.outDir, "out", "bench/results", "directory for the report and profiles")
	fs.StringVar(&o.baseline, "baseline", "", "git revision of bigseg to measure beside the current tree (A/B), or a patch (bench/ab/*.patch) applied to HEAD")
	fs.StringVar(&o.serverCPUs, "server-cpus", "0", "CPU list (taskset) of the servers under test and Redis")
	fs.StringVar(&o.clientCPUs, "client-cpus", "1", "CPU list (taskset) of wrk")
	fs.Func("env", "NAME=VALUE for every bigseg server (repeatable)", appendTo(&o.env))
	fs.Func("baseline-env", "NAME=VALUE for the baseline's servers only, after -env (repeatable); without -baseline, "+
		"the current tree's binary also runs as the baseline, with these settings", appendTo(&o.baselineEnv))
	fs.Func("tree-env", "NAME=VALUE for the current tree's servers only, after -env (repeatable): a setting the baseline does not know, "+
		"such as BIGSEG_INVENTORY_INTERVAL=0", appendTo(&o.treeEnv))
	fs.IntVar(&o.baselineEnvs, "baseline-environments", 1, "if more than 1, the baseline is the current tree serving that many environments "+
		"(BIGSEG_ENVIRONMENTS), looked up in the first, and the run ends with both servers at rest: RSS, and Redis commands spent polling")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.baselineEnvs > 1 && o.baseline != "" {
		return o, errors.New("-baseline-environments measures the current tree against itself: not with -baseline")
	}
	for _, sc := range strings.Split(*scenarios, ",") {
		if !slices.Contains(allScenarios, sc) {
			return o, fmt.Errorf("-scenarios: unknown %q (want some of %s)", sc, strings.Join(allScenarios, ","))
		}
		o.scenarios[sc] = true
	}
	if o.rounds < 1 || o.contexts < hotKeys || o.duration < time.Second {
		return o, fmt.Errorf("want -rounds >= 1, -contexts >= %d and -duration >= 1s", hotKeys)
	}
	return o, nil
}

func appendTo(list *[]string) func(string) error {
	return func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("%q: want NAME=VALUE", v)
		}
		*list = append(*list, v)
		return nil
	}
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bench is one run of the suite.
type bench struct {
	o        options
	tmp      string
	bins     binaries
	redis    *redisServer
	scripts  map[string]string // Lua scripts by name
	zipfKeys string            // file of context indices drawn from Zipf's law
	zipfLen  int64
	report   *report
}

func run(ctx context.Context, o options) error {
	started := time.Now()
	tmp, err := os.MkdirTemp("", "bigseg-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}
	b := &bench{o: o, tmp: tmp, report: newReport(o, started)}
	bins, removeBaseline, err := build(ctx, o, tmp)
	if err != nil {
		return err
	}
	defer removeBaseline()
	b.bins, b.report.baselineCommit = bins, bins.baselineCommit
	if b.scripts, err = writeScripts(tmp); err != nil {
		return err
	}
	if b.redis, err = startRedis(ctx, tmp, o.serverCPUs); err != nil {
		return err
	}
	defer b.redis.stop()
	if b.report.redisBytesPerContext, err = seed(ctx, b.redis.client, o.contexts); err != nil {
		return err
	}
	if o.baselineEnvs > 1 {
		if err := seedEnvironments(ctx, b.redis.client, o.baselineEnvs); err != nil {
			return fmt.Errorf("seed the environments: %w", err)
		}
	}
	relay := startSynchronizer(b.redis.client, syncedOnKeys(o.baselineEnvs))
	defer relay.Close()
	if err := b.measureAll(ctx); err != nil {
		return err
	}
	if o.baselineEnvs > 1 {
		relay.Close() // its writes would count in Redis's
		if b.report.idle, err = b.measureIdle(ctx, o.baselineEnvs); err != nil {
			return err
		}
	}
	b.report.elapsed = time.Since(started)
	return b.report.write(os.Stdout, filepath.Join(o.outDir, "latest.md"))
}

// measureAll starts the servers, runs the rounds, then the profiles, storms and memory.
func (b *bench) measureAll(ctx context.Context) error {
	variants := b.variants()
	if b.o.scenarios["zipf"] {
		if err := b.writeZipfKeys(); err != nil {
			return err
		}
	}
	srv, err := b.startServers(ctx, variants)
	if err != nil {
		return err
	}
	defer srv.stop()
	systems := b.systems(srv, variants)
	b.report.systems = systems
	if err := b.rounds(ctx, systems); err != nil {
		return err
	}
	if b.o.profile {
		if err := b.profiles(ctx, systems); err != nil {
			return err
		}
	}
	if b.o.scenarios["storm"] {
		for i, v := range variants {
			st, err := storm(ctx, srv.get(v.label, "defaults"), i)
			if err != nil {
				return fmt.Errorf("storm on %s: %w", v.label, err)
			}
			st.label = v.label
			b.report.storms = append(b.report.storms, st)
		}
	}
	if b.o.scenarios["memory"] {
		b.report.memory = measureMemory(ctx, variants)
	}
	return nil
}

// variants are the bigseg builds and settings measured: the current tree's, and the
// baseline's if there is one.
func (b *bench) variants() []variant {
	vs := []variant{{label: "bigseg", bin: b.bins.server, src: ".", env: slices.Concat(b.o.env, b.o.treeEnv)}}
	switch {
	case b.o.baseline != "":
		vs = append(vs, variant{label: "bigseg@" + b.o.baseline, bin: b.bins.baseline, src: b.bins.baselineSrc,
			env: slices.Concat(b.o.env, b.o.baselineEnv)})
	case b.o.baselineEnvs > 1:
		vs = append(vs, variant{label: fmt.Sprintf("bigseg@%d-environments", b.o.baselineEnvs), bin: b.bins.server, src: ".",
			env: slices.Concat(b.o.env, b.o.baselineEnv), environments: b.o.baselineEnvs})
	case len(b.o.baselineEnv) > 0:
		vs = append(vs, variant{label: "bigseg@baseline-env", bin: b.bins.server, src: ".", env: slices.Concat(b.o.env, b.o.baselineEnv)})
	}
	return vs
}

// writeZipfKeys draws the Zipf keys once, enough for every round to walk a stretch of its
// own at up to 60,000 requests per second.
func (b *bench) writeZipfKeys() error {
	perRound := (b.o.warmup + b.o.duration).Seconds() * 60_000
	b.zipfLen = max(int64(float64(b.o.rounds)*perRound), 1<<20)
	b.zipfKeys = filepath.Join(b.tmp, "zipf-keys.txt")
	start := time.Now()
	if err := writeZipfKeys(b.zipfKeys, newZipf(b.o.contexts, zipfExponent), int(b.zipfLen), zipfSeed); err != nil {
		return err
	}
	logf("drew %d Zipf keys (s = %g) over %d contexts in %s", b.zipfLen, zipfExponent, b.o.contexts, time.Since(start).Round(time.Millisecond))
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
