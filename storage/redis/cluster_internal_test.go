package redis

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"
)

// A cluster's masters get new addresses again and again (on Kubernetes, at every restart or
// failover): the state kept stays that of the current masters. The slot map is the client's
// own (ClusterSlots), so that addresses can change without a cluster; nothing is dialled.
func TestPruneKeepsTheCurrentMastersOnly(t *testing.T) {
	var mu sync.Mutex
	masters := []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}
	client := goredis.NewClusterClient(&goredis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]goredis.ClusterSlot, error) {
			mu.Lock()
			defer mu.Unlock()
			var slots []goredis.ClusterSlot
			for i, addr := range masters {
				slots = append(slots, goredis.ClusterSlot{Start: i * 16384 / len(masters), End: (i+1)*16384/len(masters) - 1, Nodes: []goredis.ClusterNode{{Addr: addr}}})
			}
			return slots, nil
		},
	})
	defer client.Close()
	ctx := context.Background()
	n := newClusterNodes(client)
	now := time.Unix(1_000_000, 0)
	read := func() { // one read of 100 keys, spread over every master, answered
		for i := range 100 {
			key := fmt.Sprint("k", i)
			n.done(ctx, n.admit(n.nodeOf(ctx, key), key, now), answered, now)
		}
	}
	read()
	for round := range 20 {
		mu.Lock()
		old := masters[round%3]
		masters[round%3] = fmt.Sprintf("10.0.1.%d:6379", round)
		want := slices.Sorted(slices.Values(masters))
		mu.Unlock()
		if err := client.ForEachMaster(ctx, func(context.Context, *goredis.Client) error { return nil }); err != nil {
			t.Fatal(err) // a reload of the slot map, at once
		}
		read()
		n.prune(ctx, now)
		if got := slices.Sorted(maps.Keys(n.nodes)); !slices.Equal(got, want) {
			t.Fatalf("round %d, after %s replaced %s: state kept of %v, want the masters %v", round, masters[round%3], old, got, want)
		}
	}
}

// The pruning rule: a master gone is forgotten, unless a pipeline to it is in flight (done
// needs its state) or it was found down lately (a stale view of the slot map could send it
// reads again); the current masters are kept whatever their state.
func TestForgetKeepsInFlightAndDownLately(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	downAt := func(at time.Time) *nodeState { return &nodeState{down: true, retryAt: at.Add(nodeRetryInterval)} }
	n := &clusterNodes{nodes: map[string]*nodeState{
		"master-idle":      {},
		"master-down-long": downAt(now.Add(-time.Hour)),
		"gone-idle":        {progress: now.Add(-time.Second)},
		"gone-in-flight":   {inflight: 1},
		"gone-probing":     {inflight: 1, probing: true, down: true, retryAt: now.Add(-time.Hour)},
		"gone-down-lately": downAt(now.Add(-forgetDownAfter + time.Second)),
		"gone-down-long":   downAt(now.Add(-forgetDownAfter - nodeRetryInterval)),
	}}
	gone := map[string]bool{}
	for addr := range n.nodes {
		gone[addr] = addr[:4] == "gone"
	}
	n.forget(gone, now)
	want := []string{"gone-down-lately", "gone-in-flight", "gone-probing", "master-down-long", "master-idle"}
	if diff := cmp.Diff(want, slices.Sorted(maps.Keys(n.nodes))); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
}
