// Command sdkresp measures the LaunchDarkly Go SDK evaluating a flag with a Big Segment rule
// through LaunchDarkly's own Redis Big Segment store (ldredis, go-server-sdk-redis-redigo)
// pointed at Redis, against the same store pointed at bigseg's Redis-protocol listener
// (BIGSEG_RESP_ADDR) in front of that Redis: the SDK process's CPU time per evaluation, and the
// Redis commands per evaluation that the backing Redis serves (INFO commandstats), which is the
// load a fleet of SDK instances puts on it. Run it with bench/sdkresp/run, which builds it and
// bigseg and pins it to CPU 1; it pins its private Redis and the bigseg servers to CPU 0. It
// only uses loopback addresses and stops by itself.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
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
	ldredis "github.com/launchdarkly/go-server-sdk-redis-redigo/v3"
	ldclient "github.com/launchdarkly/go-server-sdk/v7"
	"github.com/launchdarkly/go-server-sdk/v7/ldcomponents"
	"github.com/launchdarkly/go-server-sdk/v7/ldfiledata"
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
	flag.StringVar(&c.server, "server", "", "the bigseg server binary (bench/sdkresp/run builds it)")
	flag.IntVar(&c.contexts, "contexts", 100_000, "contexts in Redis, and in the evaluated population")
	flag.Float64Var(&c.zipf, "zipf", 1.1, "Zipf exponent of the population (> 1); 0 draws contexts uniformly")
	flag.IntVar(&c.concurrency, "concurrency", 16, "goroutines evaluating")
	flag.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured evaluations before each measurement, with a new SDK client")
	flag.DurationVar(&c.duration, "duration", 3*time.Second, "measured time of each system in each round")
	flag.IntVar(&c.rounds, "rounds", 5, "rounds")
	flag.IntVar(&c.serverCPU, "server-cpu", 0, "CPU for Redis and bigseg (taskset)")
	flag.DurationVar(&c.timeout, "timeout", 8*time.Minute, "give up after this long")
	flag.Parse()
	if c.server == "" || c.zipf != 0 && c.zipf <= 1 || c.contexts < 3 {
		fmt.Fprintln(os.Stderr, "sdkresp: -server is required (use bench/sdkresp/run), -zipf must be 0 or above 1, -contexts at least 3")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "sdkresp:", err)
		os.Exit(1)
	}
}

// The flag the SDK evaluates (from a file): its rule matches the Big Segment "beta-testers",
// generation 3, whose ref in the Big Segments data is "beta-testers.g3".
const (
	prefix     = "launchdarkly"
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

// system is one place the SDK's ldredis store reads Big Segments from.
type system struct {
	name   string
	url    string  // redis:// of what the store dials
	procs  []*proc // the servers whose CPU time its evaluations cost
	bigseg *proc   // the bigseg server, if any
	direct bool    // the baseline of the ratios
}

// mode is the SDK's Big Segments cache setting.
type mode struct {
	name     string
	cacheOff bool
}

var modes = []mode{
	{"SDK cache time 0 (every evaluation asks the store)", true},
	{"SDK cache at its defaults (1,000 contexts, 5 s)", false},
}

func run(ctx context.Context, c config) error {
	start := time.Now()
	load := loadAverage()
	dir, err := os.MkdirTemp("", "sdkresp-")
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
	results, err := rounds(ctx, c, env, flagFile)
	if err != nil {
		return err
	}
	rep := report{config: c, took: time.Since(start), load: load, affinity: allowedCPUs(), gomaxprocs: runtime.GOMAXPROCS(0),
		systems: env.systems, results: results}
	rep.print(os.Stdout)
	return nil
}

// environment is what the benchmark starts: Redis, seeded; the bigseg servers; a
// synchronizer keeping the data fresh; and the systems measured over them.
type environment struct {
	systems  []system
	redis    *redisClient
	workload *workload
	stops    []func()
}

func (e *environment) stop() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
}

func startSystems(ctx context.Context, c config, dir string) (*environment, error) {
	env := &environment{}
	redis, redisAddr, err := startRedis(c.serverCPU, dir)
	if err != nil {
		return env, err
	}
	env.stops = append(env.stops, redis.stop)
	if env.redis, err = dialRedis(redisAddr); err != nil {
		return env, err
	}
	env.stops = append(env.stops, func() { env.redis.Close() })
	if env.workload, err = seed(env.redis, c.contexts); err != nil {
		return env, err
	}
	env.stops = append(env.stops, synchronize(ctx, redisAddr))
	env.systems = append(env.systems, system{name: "ldredis -> Redis", url: "redis://" + redisAddr, procs: []*proc{redis}, direct: true})
	for _, b := range []struct{ name, cache string }{
		{"ldredis -> bigseg RESP, bigseg cache at defaults", ""},
		{"ldredis -> bigseg RESP, bigseg cache off", "BIGSEG_CACHE_SIZE=0"},
	} {
		settings := []string{"BIGSEG_REDIS_URL=redis://" + redisAddr, "BIGSEG_PREFIX=" + prefix}
		if b.cache != "" {
			settings = append(settings, b.cache)
		}
		p, respAddr, err := startBigseg(ctx, c.server, c.serverCPU, dir, settings...)
		if err != nil {
			return env, err
		}
		env.stops = append(env.stops, p.stop)
		env.systems = append(env.systems, system{name: b.name, url: "redis://" + respAddr, procs: []*proc{redis, p}, bigseg: p})
	}
	return env, nil
}

// workload is the contexts evaluated and what the flag must answer for each.
type workload struct {
	contexts []ldcontext.Context
	want     []string
}

// seed writes the contexts' Big Segments data: a third included in beta-testers (with two
// other refs), a third excluded from it (with one other ref included), a third in no segment;
// then a cursor and the synchronization time, as the Relay Proxy leaves them.
func seed(rc *redisClient, n int) (*workload, error) {
	wl := &workload{contexts: make([]ldcontext.Context, n), want: make([]string, n)}
	var cmds [][]any
	flush := func() error {
		err := rc.pipeline(cmds)
		cmds = cmds[:0]
		return err
	}
	for i := range n {
		key := "user-" + strconv.Itoa(i)
		wl.contexts[i] = ldcontext.New(key)
		hash := contextHash(key)
		switch i % 3 {
		case 0:
			cmds = append(cmds, []any{"SADD", prefix + ":big_segment_include:" + hash, segmentRef, "newsletter.g1", "eu-residents.g4"})
			wl.want[i] = inSegment
		case 1:
			cmds = append(cmds, []any{"SADD", prefix + ":big_segment_exclude:" + hash, segmentRef},
				[]any{"SADD", prefix + ":big_segment_include:" + hash, "newsletter.g1"})
			wl.want[i] = notIn
		default:
			wl.want[i] = notIn
		}
		if len(cmds) >= 2000 {
			if err := flush(); err != nil {
				return nil, fmt.Errorf("seed: %w", err)
			}
		}
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	cmds = append(cmds, []any{"SET", prefix + ":big_segments_cursor", "sdkresp-" + now},
		[]any{"SET", prefix + ":big_segments_synchronized_on", now})
	if err := flush(); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	return wl, nil
}

// contextHash is a context key's hash in the Big Segments data: base64 of its SHA-256.
func contextHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// synchronize plays the Relay Proxy while it is idle, refreshing synchronized_on every 10 s on
// a connection of its own, until the returned function is called.
func synchronize(ctx context.Context, addr string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rc, err := dialRedis(addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sdkresp: synchronizer:", err)
			return
		}
		defer rc.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
			_ = rc.pipeline([][]any{{"SET", prefix + ":big_segments_synchronized_on", strconv.FormatInt(time.Now().UnixMilli(), 10)}})
		}
	}()
	return func() { cancel(); <-done }
}

// runKey names one system in one SDK cache mode.
type runKey struct{ system, mode int }

// rounds measures every system in every mode, round after round, every other round in
// reverse order.
func rounds(ctx context.Context, c config, env *environment, flagFile string) (map[runKey][]result, error) {
	results := map[runKey][]result{}
	var order []runKey
	for m := range modes {
		for s := range env.systems {
			order = append(order, runKey{s, m})
		}
	}
	fmt.Fprintf(os.Stderr, "sdkresp: %d contexts seeded; %d runs of %v + %v warm-up per round, %d rounds\n",
		c.contexts, len(order), c.duration, c.warmup, c.rounds)
	for round := range c.rounds {
		runs := slices.Clone(order)
		if round%2 == 1 {
			slices.Reverse(runs)
		}
		for _, k := range runs {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("stopped: %w", err)
			}
			sys := env.systems[k.system]
			r, err := measure(ctx, c, env, sys, modes[k.mode], flagFile, uint64(round))
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", sys.name, modes[k.mode].name, err)
			}
			r.round = round + 1
			fmt.Fprintf(os.Stderr, "round %d: %-48s %-50s %8.0f evals/s %6.2f µs SDK CPU/eval (%3.0f%% busy) %6.3f Redis commands/eval\n",
				round+1, sys.name, modes[k.mode].name, r.rate(), r.clientCPUPerEval(), 100*r.busy(), r.redisPerEval())
			results[k] = append(results[k], r)
		}
	}
	return results, nil
}

// result is one measurement of one system in one mode.
type result struct {
	round        int
	evals, wrong int64
	elapsed      time.Duration
	clientCPU    time.Duration // this process: the SDK, its store, the evaluating goroutines
	serverCPU    time.Duration // Redis, and bigseg if the system has it
	lookups      int64         // the SDK's store lookups (GetMembership calls)
	storeErrors  int64
	redis        commandCounts // commands the backing Redis served
	resp         float64       // commands bigseg's listener answered, if the system has it
}

func (r result) rate() float64             { return float64(r.evals) / r.elapsed.Seconds() }
func (r result) perEval(x float64) float64 { return x / float64(max(r.evals, 1)) }
func (r result) clientCPUPerEval() float64 {
	return r.perEval(float64(r.clientCPU) / float64(time.Microsecond))
}
func (r result) serverCPUPerEval() float64 {
	return r.perEval(float64(r.serverCPU) / float64(time.Microsecond))
}
func (r result) redisPerEval() float64 { return r.perEval(r.redis.total()) }

// busy is the share of its CPU the SDK process used: well below 1, it waited (for the store,
// or for a CPU the machine's other work held).
func (r result) busy() float64           { return r.clientCPU.Seconds() / r.elapsed.Seconds() }
func (r result) lookupsPerEval() float64 { return r.perEval(float64(r.lookups)) }

// measure makes a new SDK client whose Big Segment store is ldredis dialling sys, warms it
// up, and measures evaluations from c.concurrency goroutines for c.duration.
func measure(ctx context.Context, c config, env *environment, sys system, md mode, flagFile string, seed uint64) (result, error) {
	client, store, err := newClient(env, sys, md, flagFile)
	if err != nil {
		return result{}, err
	}
	defer client.Close()
	evaluateFor(ctx, client, c, env.workload, c.warmup, seed*1000)
	before, err := takeCounters(ctx, env, sys, store)
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	evals, wrong := evaluateFor(ctx, client, c, env.workload, c.duration, seed*1000+500)
	elapsed := time.Since(t0)
	after, err := takeCounters(ctx, env, sys, store)
	if err != nil {
		return result{}, err
	}
	if wrong > 0 {
		return result{}, fmt.Errorf("%d of %d evaluations answered wrong", wrong, evals)
	}
	return result{
		evals: evals, wrong: wrong, elapsed: elapsed,
		clientCPU: after.client - before.client, serverCPU: after.server - before.server,
		lookups: after.lookups - before.lookups, storeErrors: after.errs - before.errs,
		redis: after.redis.sub(before.redis), resp: after.resp - before.resp,
	}, nil
}

// newClient makes an SDK client whose Big Segment store is ldredis dialling sys, counted, and
// checks its answers for one context of each kind: the wiring works, or the measurement is
// worthless.
func newClient(env *environment, sys system, md mode, flagFile string) (*ldclient.LDClient, *countingStore, error) {
	counting := &countingConfigurer{inner: ldredis.BigSegmentStore().URL(sys.url).Prefix(prefix)}
	bs := ldcomponents.BigSegments(counting)
	if md.cacheOff {
		bs.ContextCacheTime(0) // every entry has expired when read: every evaluation asks the store
	}
	client, err := ldclient.MakeCustomClient("sdkresp-sdk-key", ldclient.Config{
		DataSource:       ldfiledata.DataSource().FilePaths(flagFile),
		Events:           ldcomponents.NoEvents(),
		DiagnosticOptOut: true,
		Logging:          ldcomponents.NoLogging(),
		BigSegments:      bs,
	}, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	for i := range 3 {
		if v, _ := client.StringVariation(flagKey, env.workload.contexts[i], "default"); v != env.workload.want[i] {
			client.Close()
			return nil, nil, fmt.Errorf("%s evaluates to %q, want %q", env.workload.contexts[i].Key(), v, env.workload.want[i])
		}
	}
	return client, counting.store, nil
}

// counters are what a measurement reads before and after its evaluations.
type counters struct {
	lookups, errs  int64
	redis          commandCounts
	resp           float64
	client, server time.Duration
}

func takeCounters(ctx context.Context, env *environment, sys system, store *countingStore) (counters, error) {
	k := counters{lookups: store.calls.Load(), errs: store.errs.Load(), client: processCPU()}
	var err error
	if k.redis, err = env.redis.commandStats(); err != nil {
		return k, err
	}
	if k.resp, err = respCommands(ctx, sys.bigseg); err != nil {
		return k, err
	}
	k.server, err = cpuOf(sys.procs)
	return k, err
}

// evaluateFor evaluates the flag from c.concurrency goroutines for d, for contexts drawn from
// the population, and returns the evaluations made and those whose value was wrong.
func evaluateFor(ctx context.Context, client *ldclient.LDClient, c config, wl *workload, d time.Duration, seed uint64) (evals, wrong int64) {
	var stop atomic.Bool
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	var total, bad atomic.Int64
	var wg sync.WaitGroup
	for w := range c.concurrency {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			next := func() uint64 { return r.Uint64N(uint64(len(wl.contexts))) }
			if c.zipf > 1 {
				next = rand.NewZipf(r, c.zipf, 1, uint64(len(wl.contexts)-1)).Uint64
			}
			var n, nbad int64
			for !stop.Load() && ctx.Err() == nil {
				i := next()
				if v, _ := client.StringVariation(flagKey, wl.contexts[i], "default"); v != wl.want[i] {
					nbad++
				}
				n++
			}
			total.Add(n)
			bad.Add(nbad)
		})
	}
	wg.Wait()
	return total.Load(), bad.Load()
}
