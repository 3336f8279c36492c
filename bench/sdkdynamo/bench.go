package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ldclient "github.com/launchdarkly/go-server-sdk/v7"
)

// cacheModes are the SDK's Big Segments cache settings measured.
var cacheModes = []struct {
	name  string
	cache sdkCache
}{
	{"on (defaults: 1,000 contexts, 5 s)", sdkCache{}},
	{"off (time 0)", sdkCache{off: true}},
}

// phases of a run: the first evaluations of new SDK instances (and, through bigseg, a new
// bigseg), then as many again on the same ones.
var phases = []string{"cold", "warm"}

// runKey names one measurement.
type runKey struct {
	instances, contexts, mode int // values, and index in cacheModes
	way                       string
	phase                     int
}

// measured is one phase of one run.
type measured struct {
	evals, wrong int64
	elapsed      time.Duration
	n            counts // the DynamoDB calls the way's proxy saw
}

func run(ctx context.Context, c config, out io.Writer) error {
	start := time.Now()
	dir, err := os.MkdirTemp("", "sdkdynamo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	flagFile := filepath.Join(dir, "flags.json")
	if err := os.WriteFile(flagFile, []byte(flagData), 0o600); err != nil {
		return err
	}
	m, err := startMoto()
	if err != nil {
		return err
	}
	defer m.stop()
	// One proxy for the SDKs reading the table, one for bigseg: each way's calls apart.
	direct, err := startCountingProxy(m.url)
	if err != nil {
		return err
	}
	defer direct.close()
	viaProxy, err := startCountingProxy(m.url)
	if err != nil {
		return err
	}
	defer viaProxy.close()

	writer := newDynamoClient(m.url, nil)
	table, err := createTable(ctx, writer, "bench")
	if err != nil {
		return err
	}
	pop := population(slices.Max(c.contexts))
	t0 := time.Now()
	if err := put(ctx, writer, table, "v1", time.Now().UnixMilli(), pop); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "sdkdynamo: %d contexts written in %v\n", len(pop), time.Since(t0).Round(time.Millisecond))
	// The Relay Proxy marks the data fresh while idle; the runs last minutes, the SDK's
	// STALE after 2 minutes.
	stopSync := synchronize(ctx, writer, table)
	defer stopSync()

	results, err := measureAll(ctx, c, pop, table, flagFile, dir, direct, viaProxy)
	if err != nil {
		return err
	}
	rep := report{config: c, results: results, took: time.Since(start), load: loadAverage()}
	rep.print(out)
	return nil
}

// measureAll runs every case: each number of SDK instances, population size and SDK cache
// mode, each way (the SDKs reading the table through direct, or bigseg through viaBigseg's).
func measureAll(ctx context.Context, c config, pop []member, table, flagFile, dir string, direct, viaProxy *countingProxy) (map[runKey]measured, error) {
	results := map[runKey]measured{}
	for _, n := range c.instances {
		for _, size := range c.contexts {
			for mi, mode := range cacheModes {
				for _, way := range []string{viaDynamo, viaBigseg} {
					if err := ctx.Err(); err != nil {
						return nil, fmt.Errorf("stopped: %w", err)
					}
					proxy := direct
					if way == viaBigseg {
						proxy = viaProxy
					}
					ms, err := measureRun(ctx, c, runSpec{instances: n, pop: pop[:size], cache: mode.cache, way: way,
						table: table, endpoint: proxy.url, proxy: proxy, flagFile: flagFile, dir: dir})
					if err != nil {
						return nil, fmt.Errorf("%s, %d instances, %d contexts, SDK cache %s: %w", way, n, size, mode.name, err)
					}
					for p, r := range ms {
						results[runKey{n, size, mi, way, p}] = r
						fmt.Fprintf(os.Stderr, "%-32s %2d SDK  %6d contexts  cache %-5s %-4s: %7.1f calls %7.1f RCU per 1,000 evals (%d evals, %v)\n",
							way, n, size, mode.name[:3], phases[p], per1000(float64(r.n.lookupCalls), r.evals),
							per1000(r.n.membershipRCU, r.evals), r.evals, r.elapsed.Round(time.Millisecond))
					}
				}
			}
		}
	}
	return results, nil
}

func per1000(x float64, evals int64) float64 { return 1000 * x / float64(max(evals, 1)) }

// runSpec is one run: n SDK instances reading one way.
type runSpec struct {
	instances int
	pop       []member
	cache     sdkCache
	way       string
	table     string
	endpoint  string // the way's proxy: the SDKs' endpoint, or bigseg's
	proxy     *countingProxy
	flagFile  string
	dir       string
}

// measureRun starts what the run needs (bigseg, new SDK instances), and measures each phase.
func measureRun(ctx context.Context, c config, s runSpec) ([]measured, error) {
	var respAddr string
	if s.way == viaBigseg {
		settings := append(awsVars(s.endpoint, s.dir), "BIGSEG_DYNAMODB_TABLE="+s.table)
		b, err := startBigseg(ctx, c.server, nil, s.dir, settings...)
		if err != nil {
			return nil, err
		}
		defer b.stop()
		respAddr = b.resp
	}
	clients := make([]*ldclient.LDClient, s.instances)
	for i := range clients {
		store := dynamoStore(s.table, newDynamoClient(s.endpoint, nil))
		if s.way == viaBigseg {
			store = redisStore(respAddr)
		}
		cl, _, err := newSDK(store, s.cache, s.flagFile)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		clients[i] = cl
	}
	var out []measured
	for p := range phases {
		before := s.proxy.snapshot()
		t0 := time.Now()
		evals, wrong := evaluate(ctx, clients, s.pop, c.evals, c.concurrency, uint64(p))
		r := measured{evals: evals, wrong: wrong, elapsed: time.Since(t0), n: s.proxy.snapshot().sub(before)}
		if wrong > 0 {
			return nil, fmt.Errorf("%d of %d evaluations answered wrong", wrong, evals)
		}
		out = append(out, r)
	}
	return out, nil
}

// evaluate makes evals evaluations from concurrency goroutines, the i-th with instance i mod
// len(clients), of a context drawn uniformly from pop (the same draws, by seed, whichever way
// the SDK reads), and returns those made and those answered wrong.
func evaluate(ctx context.Context, clients []*ldclient.LDClient, pop []member, evals, concurrency int, seed uint64) (int64, int64) {
	r := rand.New(rand.NewPCG(seed, 42))
	draws := make([]int, evals)
	for i := range draws {
		draws[i] = r.IntN(len(pop))
	}
	var next, done, bad atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(evals) {
					return
				}
				m := pop[draws[i]]
				if v, _ := clients[int(i)%len(clients)].StringVariation(flagKey, m.context(), "default"); v != m.want() {
					bad.Add(1)
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return done.Load(), bad.Load()
}

// synchronize plays the Relay Proxy while it is idle, setting synchronizedOn every 10 s, until
// the returned function is called.
func synchronize(ctx context.Context, c *awsdynamodb.Client, table string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
			if err := setSynchronizedOn(ctx, c, table, time.Now().UnixMilli()); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "sdkdynamo: synchronizer:", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}
