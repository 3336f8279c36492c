// Command bench measures bigseg against the ceilings of the machine it runs on, in one run:
// a bare chi server with the same route and body size (the HTTP stack's limit) and a minimal
// go-redis client doing the same pipelined reads (Redis's limit). Absolute figures drift on
// shared machines; ratios measured in the same run hold. See BENCHMARKS.md.
//
//	bench/run [-contexts 1000000] [-duration 8s] [-rounds 2] [-profile]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"time"
)

type options struct {
	redisURL    string
	contexts    int
	duration    time.Duration
	rounds      int
	connections int
	threads     int
	profile     bool
	outDir      string
	env         []string // extra environment of the bigseg servers
}

func main() {
	var o options
	def := os.Getenv("BIGSEG_BENCH_REDIS_URL")
	if def == "" {
		def = "redis://127.0.0.1:6379"
	}
	flag.StringVar(&o.redisURL, "redis", def, "Redis to seed and read (BIGSEG_BENCH_REDIS_URL)")
	flag.IntVar(&o.contexts, "contexts", 1_000_000, "contexts to seed")
	flag.DurationVar(&o.duration, "duration", 8*time.Second, "length of each measurement")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds, each measuring every system once, alternating")
	flag.IntVar(&o.connections, "connections", 64, "wrk connections (and Redis-ceiling workers)")
	flag.IntVar(&o.threads, "threads", 1, "wrk threads")
	flag.BoolVar(&o.profile, "profile", false, "take a CPU profile of bigseg in each scenario (go tool pprof -top)")
	flag.StringVar(&o.outDir, "out", "bench/results", "directory for the report and profiles")
	flag.Func("env", "extra NAME=VALUE for the bigseg servers (repeatable), to compare settings", func(v string) error {
		o.env = append(o.env, v)
		return nil
	})
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk is not installed (bench/run installs it): %w", err)
	}
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "bigseg-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	started := time.Now()
	logf("building the server and the ceiling")
	server, ceiling := filepath.Join(tmp, "server"), filepath.Join(tmp, "ceiling")
	for bin, pkg := range map[string]string{server: "./cmd/server", ceiling: "./bench/ceiling"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}

	data, err := seed(ctx, o)
	if err != nil {
		return err
	}
	defer data.cleanup()

	r := &report{options: o, started: started, goVersion: runtime.Version(), cpus: runtime.NumCPU()}
	if err := measure(ctx, o, data, server, ceiling, tmp, r); err != nil {
		return err
	}
	r.memory, err = measureMemory()
	if err != nil {
		return err
	}
	r.elapsed = time.Since(started)
	return r.write(os.Stdout, filepath.Join(o.outDir, "latest.md"))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
