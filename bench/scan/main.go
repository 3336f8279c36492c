// Command scan measures what the inventory scan (internal/inventory) costs the store and the
// service, on a private Redis: BENCHMARKS.md's "Inventory scan". Run it with bench/scan/run,
// which builds the server (go build ./cmd/server) and this tool, and pins this tool (the load
// generator) and Redis to CPU 1; the server runs pinned to CPU 0.
//
//	bench/scan/run [-contexts 1000000] [-segments 10000] [-sample 60s] [-rounds 5] ...
//
// It starts redis-server on a free loopback port without persistence, writes -contexts
// contexts (user-0 ...) over -segments refs in the Relay Proxy's layout (1 to 3 refs each, a
// tenth excluding one, a 25th with a ref in both sets; synchronized_on and the cursor), in
// pipelines, and then:
//
//  1. full: a server scanning at -full-rate (1,000,000: not binding) from its start until its
//     first scan completes: contexts/s, server and Redis CPU per 1,000 contexts, the server's
//     RSS during the scan against a server that does not scan, Redis commands per context;
//  2. sample: a server scanning at the default 1,000 a second, measured over -sample from 5 s
//     after its start (the whole scan would last contexts/1,000 seconds): the same figures,
//     contexts counted as SMEMBERS calls / 2 (the scan's first pass reads two sets a context);
//  3. rounds: -rounds pairs of servers, one scanning at -scan-rate and one not (interval 0),
//     in alternating order, each driven with hot lookups (1,000 keys, cached) then cold ones
//     (keys random over all contexts, a fresh cache) at -rate requests a second for -round
//     each: the server's CPU per request and latency p50/p99, and the scanning one's ratio;
//  4. rounds-full: the same with the scanning server at -full-rate. A scanning server's interval
//     is 1 s in the rounds, so that a scan that ends during a round is followed by the next.
//
// Every process it starts is stopped before it returns (and on Ctrl-C).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"
)

type options struct {
	server, serverCPUs, redisCPUs string
	contexts, segments            int
	fullRate, scanRate, rate      int
	sample, round                 time.Duration
	rounds                        int
	phases, redisParams           string
}

func main() {
	var o options
	flag.StringVar(&o.server, "server", "", "the built server (go build ./cmd/server)")
	flag.StringVar(&o.serverCPUs, "server-cpus", "0", "CPUs the server is pinned to")
	flag.StringVar(&o.redisCPUs, "redis-cpus", "1", "CPUs Redis is pinned to")
	flag.IntVar(&o.contexts, "contexts", 1_000_000, "contexts written")
	flag.IntVar(&o.segments, "segments", 10_000, "segment refs they are spread over")
	flag.IntVar(&o.fullRate, "full-rate", 1_000_000, "BIGSEG_INVENTORY_READS_PER_SECOND of the full scan")
	flag.IntVar(&o.scanRate, "scan-rate", 1000, "BIGSEG_INVENTORY_READS_PER_SECOND of the scanning server in the rounds")
	flag.IntVar(&o.rate, "rate", 2000, "lookups a second in the rounds")
	flag.DurationVar(&o.sample, "sample", time.Minute, "how long the default-rate scan is measured")
	flag.DurationVar(&o.round, "round", 10*time.Second, "how long hot, then cold, lookups run in each round")
	flag.IntVar(&o.rounds, "rounds", 5, "pairs of rounds (scan, no scan)")
	flag.StringVar(&o.redisParams, "redis-params", "", "parameters of the servers' Redis URL, such as read_timeout=5s")
	flag.StringVar(&o.phases, "phases", "full,sample,rounds,rounds-full", "phases to run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "scan:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().UTC().Format("15:04:05 ")+format+"\n", args...)
}
