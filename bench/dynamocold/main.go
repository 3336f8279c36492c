// Command dynamocold measures uncached lookups on DynamoDB: bigseg with its cache off
// (BIGSEG_CACHE_SIZE=0), whose concurrent misses are read together in BatchGetItem calls of up
// to 100 keys, against bench/getitem, which reads one GetItem per lookup as LaunchDarkly's SDK
// store does, and against bigseg with BIGSEG_STORE_READS_IN_FLIGHT above the load's
// concurrency, so that no miss waits and none is batched (BatchGetItem of one key each).
//
//	dynamocold -server BIN -getitem BIN [-rounds 3] [-duration 8s] [-c 32] [-contexts 1000]
//
// It starts moto_server (pinned to -store-cpu) with a table of LaunchDarkly's layout, writes
// -contexts contexts into it with `server load`, then starts each system pinned to
// -server-cpu, each reaching moto through a counting proxy of its own (in this process, which
// bench/dynamocold/run pins to -store-cpu with moto: the load generator's core). Every round
// drives each system in turn (every other round in reverse order) from -c keep-alive
// connections for -duration, key user-i for the i-th request (so the requests in flight ask
// for distinct keys), and reports lookups/s, the server's and moto's CPU time per lookup (from
// /proc), and the DynamoDB calls and items asked per 1,000 lookups (from the proxies). Every
// answer must be a 200 with the context's memberships. Everything it starts listens on
// 127.0.0.1 and is stopped when it returns.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dynamocold:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	server, getitem      string
	rounds, conns, n     int
	duration             time.Duration
	serverCPU, storeCPU  string
	readsInFlightUnbatch int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "dynamocold-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	start := time.Now()
	fmt.Fprintf(stdout, "dynamocold: %d rounds of %v a system, %d connections, %d contexts; %s; load average %s\n",
		c.rounds, c.duration, c.conns, c.n, runtime.Version(), loadAverage())
	m, err := startMoto("taskset", "-c", c.storeCPU)
	if err != nil {
		return err
	}
	defer m.stop()
	table, err := createTable(ctx, m.url)
	if err != nil {
		return err
	}
	fixture := filepath.Join(dir, "fixture.json")
	if err := writeFixture(fixture, c.n); err != nil {
		return err
	}
	if err := load(ctx, c.server, fixture, awsVars(m.url, table, dir)); err != nil {
		return err
	}

	systems := systemsOf(c, table)
	for _, s := range systems {
		if err := s.start(dir, m.url, table, c.serverCPU); err != nil {
			return err
		}
		defer s.stop()
	}
	for _, s := range systems {
		fmt.Fprintf(stdout, "  %-16s %s\n", s.name, s.note)
	}

	rounds, err := measureRounds(ctx, stdout, c, systems, m.pid())
	if err != nil {
		return err
	}
	printSummary(stdout, systems, rounds)
	fmt.Fprintf(stdout, "dynamocold: done in %v; load average %s\n", time.Since(start).Round(time.Second), loadAverage())
	return nil
}

// parseFlags reads the command line.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("dynamocold", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.server, "server", "", "bigseg's server binary")
	fs.StringVar(&c.getitem, "getitem", "", "bench/getitem's binary")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; each drives every system once")
	fs.DurationVar(&c.duration, "duration", 8*time.Second, "load of each system in a round")
	fs.IntVar(&c.conns, "c", 32, "connections (lookups in flight)")
	fs.IntVar(&c.n, "contexts", 1000, "contexts written into the table (user-0 ...), the keys asked for in turn")
	fs.StringVar(&c.serverCPU, "server-cpu", "0", "CPU the servers are pinned to (taskset -c)")
	fs.StringVar(&c.storeCPU, "store-cpu", "1", "CPU moto_server is pinned to (taskset -c), the load generator's")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.server == "" || c.getitem == "" {
		return c, fmt.Errorf("-server and -getitem are required")
	}
	c.readsInFlightUnbatch = 2 * c.conns
	return c, nil
}

// systemsOf are the three systems measured, reading table.
func systemsOf(c config, table string) []*system {
	return []*system{
		{name: "bigseg", note: "BIGSEG_CACHE_SIZE=0, the rest at defaults (4 reads in flight, misses batched)",
			argv: []string{c.server}, env: []string{"BIGSEG_CACHE_SIZE=0", lookupTimeout}},
		{name: "bigseg-unbatched", note: fmt.Sprintf("BIGSEG_CACHE_SIZE=0 BIGSEG_STORE_READS_IN_FLIGHT=%d: no miss waits, none batched", c.readsInFlightUnbatch),
			argv: []string{c.server}, env: []string{"BIGSEG_CACHE_SIZE=0", lookupTimeout, fmt.Sprintf("BIGSEG_STORE_READS_IN_FLIGHT=%d", c.readsInFlightUnbatch)}},
		{name: "getitem", note: "bench/getitem: one strongly consistent GetItem a lookup, as LaunchDarkly's SDK store",
			argv: []string{c.getitem, "-table", table}, addrFlag: true},
	}
}

// measureRounds drives every system once a round, in an order reversed every other round, and
// returns each round's results in the systems' order.
func measureRounds(ctx context.Context, stdout io.Writer, c config, systems []*system, motoPID int) ([][]result, error) {
	var rounds [][]result
	for r := range c.rounds {
		order := append([]*system{}, systems...)
		if r%2 == 1 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		byName := map[string]result{}
		for _, s := range order {
			res, err := s.measure(ctx, motoPID, c.conns, c.n, c.duration)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", r+1, s.name, err)
			}
			byName[s.name] = res
		}
		var row []result
		for _, s := range systems {
			row = append(row, byName[s.name])
		}
		rounds = append(rounds, row)
		printRound(stdout, r+1, systems, row)
	}
	return rounds, nil
}

// lookupTimeout is bigseg's in this benchmark: bench/getitem waits for DynamoDB as long as it
// takes, and moto on a loaded host stalls past bigseg's default second now and then (every
// lookup of the batch in flight then answers 503), which would count a stall of the host as
// bigseg's failure; what this measures is throughput, not failure.
const lookupTimeout = "BIGSEG_LOOKUP_TIMEOUT=10s"

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	var a, b5, c float64
	if _, err := fmt.Sscan(string(b), &a, &b5, &c); err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.2f %.2f %.2f", a, b5, c)
}
