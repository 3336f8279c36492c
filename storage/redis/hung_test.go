package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/internal/storetest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/redis"
)

// mixedLoad is what reads of random batches of contexts, some on a faulty master and most not,
// were answered.
type mixedLoad struct {
	live, liveFailed     atomic.Int64 // contexts with no key on the faulty master
	faulty, faultyFailed atomic.Int64
	failFast             atomic.Int64 // faulty contexts refused with ErrNodeUnreachable
	mu                   sync.Mutex
	liveErrs             []string
}

// loadWorkers is how many reads mixedLoad has in flight, as a service's read slots would.
const loadWorkers = 8

// runMixedLoad reads batches of 16 random contexts with loadWorkers workers for d, each read
// bounded by the service's lookup timeout, and fails the test on a wrong answer.
func runMixedLoad(t *testing.T, store *redis.Store, hashes []string, want map[string]map[string]bool, onFaulty map[string]bool, d time.Duration) *mixedLoad {
	t.Helper()
	l := &mixedLoad{}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range loadWorkers {
		wg.Go(func() {
			batch := make([]string, 16)
			for time.Now().Before(end) {
				for i := range batch {
					batch[i] = hashes[rand.IntN(len(hashes))]
				}
				ctx, cancel := context.WithTimeout(context.Background(), segments.DefaultLookupTimeout)
				reads := store.Memberships(ctx, batch)
				cancel()
				for i, r := range reads {
					h := batch[i]
					if r.Err == nil && fmt.Sprint(storetest.Map(r.Membership)) != fmt.Sprint(want[h]) {
						t.Errorf("wrong answer %v, want %v", storetest.Map(r.Membership), want[h])
					}
					switch {
					case !onFaulty[h]:
						l.live.Add(1)
						if r.Err != nil {
							l.liveFailed.Add(1)
							l.mu.Lock()
							l.liveErrs = append(l.liveErrs, r.Err.Error())
							l.mu.Unlock()
						}
					case r.Err != nil:
						l.faulty.Add(1)
						l.faultyFailed.Add(1)
						if errors.Is(r.Err, redis.ErrNodeUnreachable) {
							l.failFast.Add(1)
						}
					default:
						l.faulty.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	return l
}

// TestClusterUnansweringMasterCostsOnlyItsContexts makes one master of three stop answering
// under mixed load, three ways: hung with its connections open (CLIENT PAUSE, as a long
// blocking command or a partition looks), its process stopped (SIGSTOP), and killed. Each way,
// no read of a context whose keys are all on the other masters may fail, the faulty master's
// contexts must soon fail at once (ErrNodeUnreachable, not sent), the faulty master must be
// sent about one read per nodeRetryInterval (a probe, one at a time), and once it answers again
// every context is read again.
func TestClusterUnansweringMasterCostsOnlyItsContexts(t *testing.T) { // not parallel: its reads must beat a timeout of 1.5 s or less
	if testing.Short() {
		t.Skip("starts a cluster and stops a node")
	}
	cluster := redistest.StartCluster(t, 3)
	uc, err := redis.NewClient(redis.ClientOptions{ClusterURL: cluster.URL()})
	if err != nil {
		t.Fatal(err)
	}
	client := uc.(*goredis.ClusterClient)
	t.Cleanup(func() { client.Close() })
	victim := cluster.Nodes[1]
	// Pipelines sent to the victim (a slot map reload asks it single commands), each counted
	// once however often go-redis tries it.
	var sent atomic.Int64
	var seen sync.Map
	client.OnNewNode(func(node *goredis.Client) {
		if node.Options().Addr == victim.Addr() {
			node.AddHook(pipelineCmdsHook(func(cmds []goredis.Cmder) {
				if _, again := seen.LoadOrStore(cmds[0], true); !again {
					sent.Add(1)
				}
			}))
		}
	})
	contexts, hashes, want := contextsOf(300)
	store := redis.New(client, "launchdarkly")
	ctx := context.Background()
	if _, err := store.Load(ctx, contexts, fixture.LoadOptions{SynchronizedOn: time.Now()}); err != nil {
		t.Fatal(err)
	}
	onVictim := map[string]bool{}
	for _, h := range hashes {
		onVictim[h] = cluster.MasterOf(t, store.IncludeKey(h)) == victim || cluster.MasterOf(t, store.ExcludeKey(h)) == victim
	}
	const faultFor = 2500 * time.Millisecond
	pause := func() {
		c := victim.Client()
		defer c.Close()
		// Longer than the load: it ends by itself, and the test waits for its end.
		if err := c.Do(ctx, "CLIENT", "PAUSE", (faultFor + time.Second).Milliseconds(), "ALL").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, fault := range []struct {
		name         string
		start, end   func()
		backAnswered bool
	}{
		{"hung (CLIENT PAUSE)", pause, func() {}, true},
		{"stopped (SIGSTOP)", victim.Freeze, victim.Thaw, true},
		{"killed", victim.Stop, func() {}, false},
	} {
		t.Run(fault.name, func(t *testing.T) {
			waitAllRead(t, store, hashes)
			fault.start()
			before := sent.Load()
			l := runMixedLoad(t, store, hashes, want, onVictim, faultFor)
			sentDuring := sent.Load() - before
			fault.end()
			t.Logf("%d reads of live masters' contexts, %d failed; %d of the faulty master's, %d failed (%d at once); %d pipelines sent to it",
				l.live.Load(), l.liveFailed.Load(), l.faulty.Load(), l.faultyFailed.Load(), l.failFast.Load(), sentDuring)
			if n := l.liveFailed.Load(); n > 0 {
				t.Errorf("%d of %d reads of contexts on live masters failed, such as %q", n, l.live.Load(), l.liveErrs[0])
			}
			if l.failFast.Load() == 0 {
				t.Error("no read of the faulty master's contexts failed at once")
			}
			// Onset: each worker's read in flight, and one each until the master is found hung;
			// then a probe per nodeRetryInterval.
			if limit := int64(2*loadWorkers) + int64(faultFor/time.Second) + 2; sentDuring > limit {
				t.Errorf("%d pipelines sent to the faulty master in %v, want at most %d (a probe a second)", sentDuring, faultFor, limit)
			}
			if fault.backAnswered {
				waitAllRead(t, store, hashes)
			}
		})
	}
}

// waitAllRead waits until one read of every context succeeds.
func waitAllRead(t *testing.T, store *redis.Store, hashes []string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		failed := 0
		for _, r := range store.Memberships(context.Background(), hashes) {
			if r.Err != nil {
				failed++
			}
		}
		if failed == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d contexts still unread", failed)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
}

// pipelineCmdsHook calls f with the commands of every pipeline sent.
type pipelineCmdsHook func([]goredis.Cmder)

func (h pipelineCmdsHook) DialHook(next goredis.DialHook) goredis.DialHook          { return next }
func (h pipelineCmdsHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }
func (h pipelineCmdsHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error { h(cmds); return next(ctx, cmds) }
}

// TestClusterShortPauseCostsNoAnswer pauses one master of three (CLIENT PAUSE, as a fork for
// BGSAVE or a slow command stalls a master), five times, for 3/5 of the read timeout (300 ms of
// the default 500 ms; here both three times longer, so that a busy machine's delays stay far
// from the timeout), under a steady load of reads that start whatever the reads before them
// are doing (as the misses of several environments, or misses rare enough to find read slots
// free, do). A pause shorter than the read timeout answers every read in time: no read may
// fail, the paused master's contexts included.
func TestClusterShortPauseCostsNoAnswer(t *testing.T) { // not parallel: its reads must beat a timeout of 1.5 s or less
	if testing.Short() {
		t.Skip("starts a cluster and pauses a node")
	}
	cluster := redistest.StartCluster(t, 3)
	const readTimeout, pauses = 3 * redis.DefaultReadTimeout, 5
	const pause = readTimeout * 3 / 5
	uc, err := redis.NewClient(redis.ClientOptions{ClusterURL: cluster.URL("read_timeout="+readTimeout.String(), "write_timeout="+readTimeout.String())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uc.Close() })
	contexts, hashes, want := contextsOf(300)
	store := redis.New(uc, "launchdarkly")
	ctx := context.Background()
	if _, err := store.Load(ctx, contexts, fixture.LoadOptions{SynchronizedOn: time.Now()}); err != nil {
		t.Fatal(err)
	}
	waitAllRead(t, store, hashes)
	victim := cluster.Nodes[1].Client()
	var reads, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond) // the load's rate, not a synchronization
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			batch := make([]string, 4)
			for i := range batch {
				batch[i] = hashes[rand.IntN(len(hashes))]
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*readTimeout)
				defer cancel()
				for i, r := range store.Memberships(ctx, batch) {
					switch {
					case r.Err != nil:
						failed.Add(1)
						firstErr.CompareAndSwap(nil, r.Err.Error())
					case fmt.Sprint(storetest.Map(r.Membership)) != fmt.Sprint(want[batch[i]]):
						t.Errorf("wrong answer %v, want %v", storetest.Map(r.Membership), want[batch[i]])
					}
				}
				reads.Add(1)
			})
		}
	})
	for range pauses {
		before := reads.Load()
		waitUntil(t, "reads between pauses", func() bool { return reads.Load() >= before+20 })
		if err := victim.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
			t.Fatal(err)
		}
		if err := victim.Ping(ctx).Err(); err != nil { // answered once the pause is over
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads of 4 contexts with %d pauses of %v, %d contexts failed", reads.Load(), pauses, pause, failed.Load())
	if n := failed.Load(); n > 0 {
		t.Errorf("%d context reads failed across %d pauses of %v, below the read timeout (%v), such as %q",
			n, pauses, pause, readTimeout, firstErr.Load())
	}
}
