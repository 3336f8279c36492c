package redis_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
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

// fixture returns n contexts with distinct refs, and their expected memberships by hash.
func contextsOf(n int) ([]fixture.Context, []string, map[string]map[string]bool) {
	var contexts []fixture.Context
	var hashes []string
	want := map[string]map[string]bool{}
	for i := range n {
		h := segments.Hash(fmt.Sprintf("user-%d", i))
		c := fixture.Context{Hash: h, Included: []string{fmt.Sprintf("seg-%d.g1", i%7)}, Excluded: []string{fmt.Sprintf("seg-%d.g2", i%5)}}
		contexts = append(contexts, c)
		hashes = append(hashes, h)
		want[h] = map[string]bool{c.Included[0]: true, c.Excluded[0]: false}
	}
	return contexts, hashes, want
}

// check reads hashes in one call and compares with want; it returns the number of failed
// reads and fails the test on a wrong answer.
func check(t *testing.T, store *redis.Store, hashes []string, want map[string]map[string]bool) int {
	t.Helper()
	failed := 0
	for i, r := range store.Memberships(context.Background(), hashes) {
		if r.Err != nil {
			failed++
			continue
		}
		got := storetest.Map(r.Membership)
		if fmt.Sprint(got) != fmt.Sprint(want[hashes[i]]) {
			t.Errorf("context %d: got %v, want %v", i, got, want[hashes[i]])
		}
	}
	return failed
}

// keysPerNode counts the keys on each master.
func keysPerNode(t *testing.T, c *goredis.ClusterClient) []int64 {
	t.Helper()
	var mu sync.Mutex
	var counts []int64
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, m *goredis.Client) error {
		n, err := m.DBSize(ctx).Result()
		mu.Lock()
		counts = append(counts, n)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

func TestCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client(t)
	hook := &roundTrips{} // on the nodes: reads send each node its pipeline straight
	client.OnNewNode(func(node *goredis.Client) { node.AddHook(hook) })
	contexts, hashes, want := contextsOf(300)

	for _, prefix := range []string{"launchdarkly", "{ld}"} {
		t.Run(prefix, func(t *testing.T) {
			ctx := context.Background()
			err := client.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
				return m.FlushAll(ctx).Err() // our own cluster
			})
			if err != nil {
				t.Fatal(err)
			}
			store := redis.New(client, prefix)
			if _, err := store.Load(ctx, contexts, fixture.LoadOptions{SynchronizedOn: time.Now(), BatchSize: 64}); err != nil {
				t.Fatal(err)
			}
			nodes := 0
			for _, n := range keysPerNode(t, client) {
				if n > 0 {
					nodes++
				}
			}
			if wantNodes := map[string]int{"launchdarkly": 3, "{ld}": 1}[prefix]; nodes != wantNodes {
				t.Errorf("keys on %d nodes, want %d", nodes, wantNodes)
			}
			before := hook.n.Load()
			if failed := check(t, store, hashes, want); failed > 0 {
				t.Fatalf("%d failed reads", failed)
			}
			// One pipeline for each master the keys are on: one round trip to each.
			if got := hook.n.Load() - before; got != int64(nodes) {
				t.Errorf("a batch of %d contexts across slots took %d pipeline calls, want %d", len(hashes), got, nodes)
			}
			for _, h := range hashes[:20] {
				before := hook.n.Load()
				check(t, store, []string{h}, want)
				masters := map[*redistest.Server]bool{cluster.MasterOf(t, store.IncludeKey(h)): true, cluster.MasterOf(t, store.ExcludeKey(h)): true}
				if got := hook.n.Load() - before; got != int64(len(masters)) {
					t.Errorf("one lookup took %d calls, want %d (its keys' masters)", got, len(masters))
				}
			}
			checkPolls(t, cluster, client, store, prefix)
		})
	}
}

// checkPolls reads the metadata of a cluster: one pipeline, to the nodes of its two keys, with
// values over their bounds refused.
func checkPolls(t *testing.T, cluster *redistest.Cluster, client *goredis.ClusterClient, store *redis.Store, prefix string) {
	t.Helper()
	ctx := context.Background()
	if md, err := store.Metadata(ctx); err != nil || md.LastSynchronized.IsZero() || md.Cursor == "" {
		t.Errorf("metadata: %v, %v", md, err)
	}
	// A poll is one pipeline, to the nodes of its two keys: with a hash-tagged prefix
	// one node, else the nodes of two slots, asked concurrently.
	perNode := nodeCalls(t, cluster, func(c *goredis.ClusterClient) {
		if md, err := redis.New(c, prefix).Metadata(ctx); err != nil || md.Cursor == "" {
			t.Errorf("metadata through a new client: %v, %v", md, err)
		}
	})
	slots := map[int64]bool{}
	for _, k := range []string{store.SynchronizedOnKey(), store.CursorKey()} {
		slots[client.ClusterKeySlot(ctx, k).Val()] = true
	}
	wantNodes := map[string]int{"launchdarkly": 2, "{ld}": 1}[prefix]
	if len(slots) != wantNodes {
		t.Errorf("the two keys are in %d slots, want %d", len(slots), wantNodes)
	}
	total := 0
	for _, n := range perNode {
		total += n
		if n != 1 {
			t.Errorf("a poll sent %d calls to one node, want 1: %v", n, perNode)
		}
	}
	if total > wantNodes {
		t.Errorf("a poll called %d nodes, want at most %d", total, wantNodes)
	}
	// On a cluster too, a value beyond its bound is refused.
	client.Set(ctx, store.CursorKey(), strings.Repeat("c", segments.MaxCursorBytes+1), 0)
	if _, err := store.Metadata(ctx); !errors.Is(err, segments.ErrInvalidMetadata) {
		t.Errorf("a cursor of %d bytes: %v, want ErrInvalidMetadata", segments.MaxCursorBytes+1, err)
	}
}

// nodeCalls runs f twice with a new client of the cluster, and counts the commands and
// pipelines each node got the second time (the first time also opens the connections, whose
// set-up commands pass through hooks too).
func nodeCalls(t *testing.T, cluster *redistest.Cluster, f func(*goredis.ClusterClient)) map[string]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	counting := false
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs(), Protocol: 2})
	defer c.Close()
	c.OnNewNode(func(node *goredis.Client) {
		addr := node.Options().Addr
		node.AddHook(callHook(func() {
			mu.Lock()
			defer mu.Unlock()
			if counting {
				counts[addr]++
			}
		}))
	})
	f(c)
	mu.Lock()
	counting = true
	mu.Unlock()
	f(c)
	mu.Lock()
	defer mu.Unlock()
	return counts
}

// callHook calls f for every command or pipeline sent.
type callHook func()

func (h callHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h callHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error { h(); return next(ctx, cmd) }
}
func (h callHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error { h(); return next(ctx, cmds) }
}

// pipelineHook calls f for every pipeline sent.
type pipelineHook func()

func (h pipelineHook) DialHook(next goredis.DialHook) goredis.DialHook          { return next }
func (h pipelineHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }
func (h pipelineHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error { h(); return next(ctx, cmds) }
}

// readContinuously reads every context in batches until stop is closed, counting reads and
// failed reads; wrong answers fail the test.
func readContinuously(t *testing.T, store *redis.Store, hashes []string, want map[string]map[string]bool, stop <-chan struct{}) (reads, failed *atomic.Int64, done *sync.WaitGroup) {
	reads, failed, done = &atomic.Int64{}, &atomic.Int64{}, &sync.WaitGroup{}
	for w := range 4 {
		done.Go(func() {
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := (i * 10) % len(hashes)
				n := check(t, store, hashes[start:min(start+10, len(hashes))], want)
				reads.Add(1)
				failed.Add(int64(n))
			}
		})
	}
	return reads, failed, done
}

func TestClusterReshardDuringReads(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client(t)
	contexts, hashes, want := contextsOf(500)
	store := redis.New(client, "launchdarkly")
	if _, err := store.Load(context.Background(), contexts, fixture.LoadOptions{SynchronizedOn: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, n := range cluster.Nodes {
		id, err := n.Client().ClusterMyID(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids[n.Addr()] = id
	}
	stop := make(chan struct{})
	reads, failed, done := readContinuously(t, store, hashes, want, stop)
	// Move 3000 slots (and their keys) from the first node to the second while reads go on.
	out, err := exec.Command("redis-cli", "--cluster", "reshard", cluster.Nodes[0].Addr(),
		"--cluster-from", ids[cluster.Nodes[0].Addr()], "--cluster-to", ids[cluster.Nodes[1].Addr()],
		"--cluster-slots", "3000", "--cluster-yes", "--cluster-pipeline", "10").CombinedOutput()
	if err != nil {
		t.Fatalf("reshard: %v\n%s", err, tail(out))
	}
	close(stop)
	done.Wait()
	cluster.WaitOK(t)
	t.Logf("%d batch reads during the reshard, %d failed context reads", reads.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d context reads failed during a slot migration; go-redis follows MOVED and ASK, so none should", failed.Load())
	}
	if reads.Load() == 0 {
		t.Error("no reads ran during the reshard")
	}
	if n := check(t, store, hashes, want); n != 0 {
		t.Errorf("%d reads failed after the reshard", n)
	}
}

func TestClusterNodeRestartDuringReads(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs(),
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { client.Close() })
	contexts, hashes, want := contextsOf(300)
	store := redis.New(client, "launchdarkly")
	if _, err := store.Load(context.Background(), contexts, fixture.LoadOptions{SynchronizedOn: time.Now()}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	reads, failed, done := readContinuously(t, store, hashes, want, stop)
	node := cluster.Nodes[2]
	node.Shutdown() // saves its data and cluster config first
	before := reads.Load()
	waitUntil(t, "reads while the node is down", func() bool { return reads.Load() > before+20 })
	node.Restart()
	cluster.WaitOK(t)
	// Recovery: every context reads again without restarting the client.
	waitUntil(t, "all contexts readable again", func() bool { return check(t, store, hashes, want) == 0 })
	close(stop)
	done.Wait()
	t.Logf("%d batch reads, %d failed context reads while a master was down", reads.Load(), failed.Load())
	if failed.Load() == 0 {
		t.Error("no read failed while a master was down: the test did not test an outage")
	}
}

func TestSentinelFailoverDuringReads(t *testing.T) {
	t.Parallel()
	set := redistest.StartSentinel(t, "bigseg-master")
	client := goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: set.MasterName, SentinelAddrs: []string{set.Sentinel.Addr()},
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { client.Close() })
	contexts, hashes, want := contextsOf(200)
	store := redis.New(client, "launchdarkly")
	ctx := context.Background()
	if _, err := store.Load(ctx, contexts, fixture.LoadOptions{SynchronizedOn: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 { // replicated before the failover
		t.Fatalf("WAIT: %d replicas, %v", n, err)
	}
	stop := make(chan struct{})
	reads, failed, done := readContinuously(t, store, hashes, want, stop)
	set.Failover(t)
	waitUntil(t, "all contexts readable from the new master", func() bool { return check(t, store, hashes, want) == 0 })
	// The client now talks to the new master.
	if err := client.Set(ctx, "bigseg-failover-probe", "1", 0).Err(); err != nil {
		t.Errorf("write after failover: %v", err)
	}
	close(stop)
	done.Wait()
	t.Logf("%d batch reads, %d failed context reads during the failover", reads.Load(), failed.Load())
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

func tail(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// TestClusterDeadMasterIsNotAskedAgainAtOnce kills a master that has no replica: the first
// read that reaches it fails its contexts only; the reads right after it do not send its
// commands at all (ErrNodeUnreachable), so they wait for no retry of it, and still read every
// other context.
func TestClusterDeadMasterIsNotAskedAgainAtOnce(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs(), MaxRetries: 1})
	t.Cleanup(func() { client.Close() })
	victim := cluster.Nodes[1]
	var sent atomic.Int64 // pipelines to the victim (a slot map reload asks it single commands)
	client.OnNewNode(func(node *goredis.Client) {
		if node.Options().Addr == victim.Addr() {
			node.AddHook(pipelineHook(func() { sent.Add(1) }))
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
	victim.Stop()
	for round := range 2 {
		before := sent.Load()
		for i, r := range store.Memberships(ctx, hashes) {
			h := hashes[i]
			switch {
			case onVictim[h] && r.Err == nil:
				t.Fatalf("round %d: a context on the dead master was answered: %v", round, storetest.Map(r.Membership))
			case !onVictim[h] && r.Err != nil:
				t.Fatalf("round %d: a context on a live master failed: %v", round, r.Err)
			case !onVictim[h] && fmt.Sprint(storetest.Map(r.Membership)) != fmt.Sprint(want[h]):
				t.Fatalf("round %d: wrong answer %v", round, storetest.Map(r.Membership))
			case round == 1 && onVictim[h] && !errors.Is(r.Err, redis.ErrNodeUnreachable):
				t.Fatalf("round %d: a context on the dead master: %v, want ErrNodeUnreachable", round, r.Err)
			}
		}
		switch {
		case round == 0 && sent.Load() == before:
			t.Fatal("the first read after the kill sent the dead master nothing: the test counts nothing")
		case round == 1 && sent.Load() != before:
			t.Errorf("the read right after the dead master failed sent it %d pipelines", sent.Load()-before)
		}
	}
}

// TestClusterForgetsMastersGone replaces a master of a cluster by a node on a new address, as
// a restart or failover does on Kubernetes, and checks that the store keeps the state of the
// current masters only: an address that no longer serves slots is forgotten at the next status
// poll, so what is kept does not grow with every address a master ever had. (One master
// replaced checks this as well as all three, in a third of the time.)
func TestClusterForgetsMastersGone(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client(t)
	contexts, hashes, want := contextsOf(300)
	store := redis.New(client, "launchdarkly")
	ctx := context.Background()
	if _, err := store.Load(ctx, contexts, fixture.LoadOptions{SynchronizedOn: time.Now()}); err != nil {
		t.Fatal(err)
	}
	old := cluster.Masters(t)[0]
	node := cluster.Replace(t, old)
	// Read until the client's slot map sends the new master its keys (the old one answers
	// MOVED, which has the slot map reloaded).
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(store.ClusterAddrs(), node.Addr()) {
		if failed := check(t, store, hashes, want); failed > 0 {
			t.Fatalf("%d failed reads", failed)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store never read from the new master %s: it knows %v", node.Addr(), store.ClusterAddrs())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	cluster.Remove(t, old)
	if _, err := store.Metadata(ctx); err != nil { // the status poll, which prunes
		t.Fatal(err)
	}
	var masters []string
	for _, m := range cluster.Masters(t) {
		masters = append(masters, m.Addr())
	}
	if got, want := store.ClusterAddrs(), slices.Sorted(slices.Values(masters)); !slices.Equal(got, want) {
		t.Errorf("after %s replaced %s: the store keeps the state of %v, want the masters %v", node.Addr(), old.Addr(), got, want)
	}
	if failed := check(t, store, hashes, want); failed > 0 {
		t.Fatalf("%d failed reads after the master was replaced", failed)
	}
}
