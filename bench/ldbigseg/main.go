// Command ldbigseg measures LaunchDarkly Go SDK evaluations per second of a flag with a Big
// Segment rule, with the SDK reading Redis directly and with the SDK reading bigseg through
// integrations/ldbigseg, side by side in one run: each system in turn, round after round, every
// other round in reverse order. Run it with bench/ldbigseg/run, which builds it and bigseg and
// pins it to CPU 1; it pins its private Redis and the bigseg servers to CPU 0. It only uses
// loopback addresses and stops by itself. A module of its own (the LaunchDarkly SDK stays out
// of bench's go.mod), with ldbigseg from this repository.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/launchdarkly/go-sdk-common/v3/ldcontext"
	ldclient "github.com/launchdarkly/go-server-sdk/v7"
	"github.com/launchdarkly/go-server-sdk/v7/ldcomponents"
	"github.com/launchdarkly/go-server-sdk/v7/ldfiledata"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/integrations/ldbigseg"
)

// config is the command line.
type config struct {
	server      string
	contexts    int
	zipf        float64
	concurrency int
	warmup      time.Duration
	duration    time.Duration
	rounds      int
	serverCPU   int
	timeout     time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.server, "server", "", "the bigseg server binary (bench/ldbigseg/run builds it)")
	flag.IntVar(&c.contexts, "contexts", 100_000, "contexts in Redis, and in the evaluated population")
	flag.Float64Var(&c.zipf, "zipf", 1.1, "Zipf exponent of the population: how much the busiest contexts dominate")
	flag.IntVar(&c.concurrency, "concurrency", 16, "goroutines evaluating")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured time before each measurement, with a new SDK client")
	flag.DurationVar(&c.duration, "duration", 2*time.Second, "measured time of each system in each round")
	flag.IntVar(&c.rounds, "rounds", 5, "rounds")
	flag.IntVar(&c.serverCPU, "server-cpu", 0, "CPU for Redis and bigseg (taskset)")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	if c.server == "" {
		fmt.Fprintln(os.Stderr, "bench: -server is required (use bench/ldbigseg/run)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// The flag the SDK evaluates (from a file): its rule matches the Big Segment "beta-testers",
// generation 3, whose ref in the Big Segments data is "beta-testers.g3".
const (
	flagKey    = "new-checkout"
	segmentRef = "beta-testers.g3"
	inSegment  = "in-segment"
	notIn      = "everyone-else"
	flagData   = `{
  "flags": {"new-checkout": {"key": "new-checkout", "version": 1, "on": true, "salt": "f",
    "variations": ["everyone-else", "in-segment"], "offVariation": 0, "fallthrough": {"variation": 0},
    "rules": [{"id": "beta", "variation": 1, "clauses": [{"attribute": "key", "op": "segmentMatch", "values": ["beta-testers"]}]}]}},
  "segments": {"beta-testers": {"key": "beta-testers", "version": 1, "salt": "s", "unbounded": true, "generation": 3}}
}`
)

// system is one way for the SDK to read Big Segments.
type system struct {
	name    string
	store   func() subsystems.ComponentConfigurer[subsystems.BigSegmentStore]
	servers []*proc // the processes whose CPU time this system's evaluations cost
	direct  bool    // the baseline of the ratios
}

// mode is the SDK's Big Segments cache setting.
type mode struct {
	name     string
	cacheOff bool
}

var modes = []mode{{"SDK cache off", true}, {"SDK cache at defaults (1000 contexts, 5 s)", false}}

func run(ctx context.Context, c config) error {
	start := time.Now()
	loadBefore := loadAverage()
	dir, err := os.MkdirTemp("", "ldbigseg-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	flagFile := filepath.Join(dir, "flags.json")
	if err := os.WriteFile(flagFile, []byte(flagData), 0o600); err != nil {
		return err
	}
	env, err := startSystems(ctx, c, dir)
	defer env.stop()
	if err != nil {
		return err
	}
	results, err := rounds(ctx, c, env.systems, flagFile, env.workload)
	if err != nil {
		return err
	}
	rep := report{config: c, took: time.Since(start), affinity: allowedCPUs(), loadBefore: loadBefore, gomaxprocs: runtime.GOMAXPROCS(0)}
	for m, md := range modes {
		section := reportSection{mode: md.name}
		for s, sys := range env.systems {
			section.rows = append(section.rows, reportRow{name: sys.name, direct: sys.direct, runs: results[runKey{s, m}]})
		}
		rep.sections = append(rep.sections, section)
	}
	rep.print(os.Stdout)
	return nil
}

// environment is what the benchmark starts: Redis, seeded; two bigseg servers; a synchronizer
// keeping the data fresh; and the systems measured over them.
type environment struct {
	systems  []system
	workload *workload
	stops    []func()
}

// stop stops what was started, last first.
func (e *environment) stop() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
}

func startSystems(ctx context.Context, c config, dir string) (*environment, error) {
	env := &environment{}
	redisLog, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		return env, err
	}
	env.stops = append(env.stops, func() { redisLog.Close() })
	redis, redisAddr, err := startRedis(c.serverCPU, dir, redisLog)
	if err != nil {
		return env, err
	}
	env.stops = append(env.stops, redis.stop)
	const prefix = "launchdarkly"
	rc := goredis.NewClient(&goredis.Options{Addr: redisAddr})
	env.stops = append(env.stops, func() { rc.Close() })
	if env.workload, err = seed(ctx, rc, prefix, c.contexts); err != nil {
		return env, err
	}
	env.stops = append(env.stops, synchronize(ctx, rc, prefix))
	redisURL := "redis://" + redisAddr
	bigsegOff, urlOff, err := startBigseg(c.server, c.serverCPU, dir, "BIGSEG_REDIS_URL="+redisURL, "BIGSEG_CACHE_SIZE=0")
	if err != nil {
		return env, err
	}
	env.stops = append(env.stops, bigsegOff.stop)
	bigsegOn, urlOn, err := startBigseg(c.server, c.serverCPU, dir, "BIGSEG_REDIS_URL="+redisURL)
	if err != nil {
		return env, err
	}
	env.stops = append(env.stops, bigsegOn.stop)
	env.systems = []system{
		{name: "Redis direct, ldredis's reads (2 SMEMBERS in turn)", direct: true, servers: []*proc{redis},
			store: func() subsystems.ComponentConfigurer[subsystems.BigSegmentStore] {
				return redisStoreConfigurer{addr: redisAddr, prefix: prefix}
			}},
		{name: "Redis direct, pipelined (1 round trip)", servers: []*proc{redis},
			store: func() subsystems.ComponentConfigurer[subsystems.BigSegmentStore] {
				return redisStoreConfigurer{addr: redisAddr, prefix: prefix, pipelined: true}
			}},
		{name: "ldbigseg -> bigseg, bigseg cache off", servers: []*proc{redis, bigsegOff},
			store: func() subsystems.ComponentConfigurer[subsystems.BigSegmentStore] {
				return ldbigseg.BigSegmentStore().BaseURL(urlOff)
			}},
		{name: "ldbigseg -> bigseg, bigseg cache at defaults", servers: []*proc{redis, bigsegOn},
			store: func() subsystems.ComponentConfigurer[subsystems.BigSegmentStore] {
				return ldbigseg.BigSegmentStore().BaseURL(urlOn)
			}},
	}
	return env, nil
}

// synchronize plays the synchronizer, keeping the data fresh until the returned function is
// called.
func synchronize(ctx context.Context, rc *goredis.Client, prefix string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			rc.Set(ctx, prefix+":big_segments_synchronized_on", strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// runKey names one system in one SDK cache mode.
type runKey struct{ system, mode int }

// rounds measures every system in every mode, round after round, every other round in
// reverse order.
func rounds(ctx context.Context, c config, systems []system, flagFile string, wl *workload) (map[runKey][]result, error) {
	results := map[runKey][]result{}
	var order []runKey
	for m := range modes {
		for s := range systems {
			order = append(order, runKey{s, m})
		}
	}
	fmt.Fprintf(os.Stderr, "bench: %d contexts seeded; %d runs of %v + %v warm-up per round, %d rounds\n",
		c.contexts, len(order), c.duration, c.warmup, c.rounds)
	for round := range c.rounds {
		runs := append([]runKey(nil), order...)
		if round%2 == 1 {
			slices.Reverse(runs)
		}
		for _, k := range runs {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("stopped: %w", err)
			}
			r, err := measure(ctx, c, systems[k.system], modes[k.mode], flagFile, wl, uint64(round))
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", systems[k.system].name, modes[k.mode].name, err)
			}
			fmt.Fprintf(os.Stderr, "round %d: %-48s %-42s %8.0f evals/s  %.3f lookups/eval\n",
				round+1, systems[k.system].name, modes[k.mode].name, r.rate(), r.lookupsPerEval())
			results[k] = append(results[k], r)
		}
	}
	return results, nil
}

// workload is the contexts the benchmark evaluates and what the flag must answer for each.
type workload struct {
	contexts []ldcontext.Context
	want     []string
}

// seed writes the contexts' Big Segments data: a third included in beta-testers (with two
// other refs), a third excluded from it (with one other ref included), a third in no segment.
func seed(ctx context.Context, rc *goredis.Client, prefix string, n int) (*workload, error) {
	wl := &workload{contexts: make([]ldcontext.Context, n), want: make([]string, n)}
	pipe := rc.Pipeline()
	for i := range n {
		key := "user-" + strconv.Itoa(i)
		wl.contexts[i] = ldcontext.New(key)
		hash := ldbigsegHash(key)
		switch i % 3 {
		case 0:
			pipe.SAdd(ctx, prefix+":big_segment_include:"+hash, segmentRef, "newsletter.g1", "eu-residents.g4")
			wl.want[i] = inSegment
		case 1:
			pipe.SAdd(ctx, prefix+":big_segment_exclude:"+hash, segmentRef)
			pipe.SAdd(ctx, prefix+":big_segment_include:"+hash, "newsletter.g1")
			wl.want[i] = notIn
		default:
			wl.want[i] = notIn
		}
		if pipe.Len() >= 3000 || i == n-1 {
			if _, err := pipe.Exec(ctx); err != nil {
				return nil, fmt.Errorf("seeding Redis: %w", err)
			}
		}
	}
	return wl, nil
}

// result is one measurement of one system in one mode.
type result struct {
	evals, wrong      int64
	elapsed           time.Duration
	clientCPU         time.Duration // this process: the SDK, the store's client side, the workers
	serverCPU         time.Duration // Redis, and bigseg if the system uses it
	lookups, storeErr int64
	latencies         []time.Duration // of the SDK's store lookups (its cache misses), sorted
}

func (r result) rate() float64 { return float64(r.evals) / r.elapsed.Seconds() }
func (r result) lookupsPerEval() float64 {
	return float64(r.lookups) / float64(max(r.evals, 1))
}

// measure makes a new SDK client reading Big Segments through sys, warms it up, and measures
// evaluations from c.concurrency goroutines for c.duration.
func measure(ctx context.Context, c config, sys system, md mode, flagFile string, wl *workload, seed uint64) (result, error) {
	counting := &countingConfigurer{inner: sys.store()}
	bs := ldcomponents.BigSegments(counting)
	if md.cacheOff {
		bs.ContextCacheTime(0) // every entry is expired when read: every evaluation asks the store
	}
	client, err := ldclient.MakeCustomClient("bench-sdk-key", ldclient.Config{
		DataSource:       ldfiledata.DataSource().FilePaths(flagFile),
		Events:           ldcomponents.NoEvents(),
		DiagnosticOptOut: true,
		Logging:          ldcomponents.NoLogging(),
		BigSegments:      bs,
	}, 5*time.Second)
	if err != nil {
		return result{}, err
	}
	defer client.Close()
	// A known answer first: the wiring works, or the measurement is worthless.
	if v, _ := client.StringVariation(flagKey, wl.contexts[0], "default"); v != wl.want[0] {
		return result{}, fmt.Errorf("%s evaluates to %q, want %q", wl.contexts[0].Key(), v, wl.want[0])
	}

	evaluateFor(ctx, client, c, wl, c.warmup, seed*1000)
	store := counting.store
	lookups0, errs0 := store.calls.Load(), store.errs.Load()
	store.record(true)
	client0 := processCPU()
	server0, err := cpuOf(sys.servers)
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	evals, wrong := evaluateFor(ctx, client, c, wl, c.duration, seed*1000+500)
	elapsed := time.Since(t0)
	client1 := processCPU()
	server1, err := cpuOf(sys.servers)
	if err != nil {
		return result{}, err
	}
	return result{
		evals: evals, wrong: wrong, elapsed: elapsed,
		clientCPU: client1 - client0, serverCPU: server1 - server0,
		lookups: store.calls.Load() - lookups0, storeErr: store.errs.Load() - errs0,
		latencies: store.record(false),
	}, nil
}

// evaluateFor evaluates the flag from c.concurrency goroutines for d, for contexts drawn from
// the Zipf population, and returns the evaluations made and those whose value was wrong.
func evaluateFor(ctx context.Context, client *ldclient.LDClient, c config, wl *workload, d time.Duration, seed uint64) (evals, wrong int64) {
	var stop atomic.Bool
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	var total, bad atomic.Int64
	var wg sync.WaitGroup
	for w := range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			zipf := rand.NewZipf(r, c.zipf, 1, uint64(len(wl.contexts)-1))
			var n, nbad int64
			for !stop.Load() && ctx.Err() == nil {
				i := zipf.Uint64()
				if v, _ := client.StringVariation(flagKey, wl.contexts[i], "default"); v != wl.want[i] {
					nbad++
				}
				n++
			}
			total.Add(n)
			bad.Add(nbad)
		}()
	}
	wg.Wait()
	return total.Load(), bad.Load()
}

// processCPU is this process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cpuOf(procs []*proc) (time.Duration, error) {
	var sum time.Duration
	for _, p := range procs {
		d, err := p.cpuTime()
		if err != nil {
			return 0, errors.Join(fmt.Errorf("CPU time of %s", p.name), err)
		}
		sum += d
	}
	return sum, nil
}

// ldbigsegHash is a context key's hash in the Big Segments data: base64 of its SHA-256.
func ldbigsegHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.StdEncoding.EncodeToString(sum[:])
}
