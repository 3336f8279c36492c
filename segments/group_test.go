package segments

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// threeStores are production, staging and qa, each holding alice in a segment of its own; qa
// was never synchronized.
func threeStores(c *clock) (names []string, stores []*fakeStore, svcs []*Service) {
	names = []string{"production", "staging", "qa"}
	for i, n := range names {
		f := newFakeStore()
		f.put("alice", []string{n + ".g1"}, nil)
		if i < 2 {
			f.setMeta(c.Now(), nil)
		}
		f.cursor = "c1"
		stores = append(stores, f)
		svcs = append(svcs, New(f, WithClock(c.Now)))
	}
	return names, stores, svcs
}

// batchOf reads every store's metadata, as one round trip would, counting the reads.
func batchOf(stores []*fakeStore, calls *atomic.Int64) func(context.Context) []MetadataRead {
	return func(ctx context.Context) []MetadataRead {
		calls.Add(1)
		out := make([]MetadataRead, len(stores))
		for i, f := range stores {
			out[i].Metadata, out[i].Err = f.Metadata(ctx)
		}
		return out
	}
}

// A group polls every environment with one read a tick, and each keeps its own status.
func TestGroupPollsOnceATick(t *testing.T) {
	c := newClock()
	names, stores, svcs := threeStores(c)
	var calls atomic.Int64
	g := NewGroup(names, svcs, batchOf(stores, &calls))
	if unreachable := g.Poll(context.Background()); unreachable || calls.Load() != 1 {
		t.Fatalf("a poll: unreachable %v, %d batch reads, want one", unreachable, calls.Load())
	}
	for i, s := range svcs {
		st, polled := s.Status()
		if !polled || !st.Available || st.Stale != (names[i] == "qa") {
			t.Errorf("%s: %+v", names[i], st)
		}
	}
	if ready, why := g.Readiness(); !ready {
		t.Errorf("readiness: %s (stale data keeps an instance ready)", why)
	}
	stores[1].setMeta(time.Time{}, errBoom)
	g.Poll(context.Background())
	if ready, why := g.Readiness(); ready || !strings.Contains(why, "staging: the Big Segment store is unavailable") || strings.Contains(why, "production") {
		t.Errorf("with staging unavailable: %v %q", ready, why)
	}
}

// A change in one environment (a new cursor) drops only that environment's cached answers.
func TestGroupChangeDropsOnlyItsEnvironmentsCache(t *testing.T) {
	c := newClock()
	names, stores, svcs := threeStores(c)
	var calls atomic.Int64
	g := NewGroup(names, svcs, batchOf(stores, &calls))
	g.Poll(context.Background())
	ctx := context.Background()
	for _, s := range svcs {
		s.LookupHash(ctx, Hash("alice"))
	}
	stores[0].patch("alice", []string{"production.g2"}, "c2")
	g.Poll(ctx)
	for i, s := range svcs {
		before := stores[i].reads.Load()
		a := s.LookupHash(ctx, Hash("alice"))
		read := stores[i].reads.Load() - before
		switch {
		case i == 0 && (read != 1 || !mapOf(a.Membership)["production.g2"]):
			t.Errorf("production after its change: %d reads, %v", read, mapOf(a.Membership))
		case i > 0 && (read != 0 || !a.Cached):
			t.Errorf("%s after production's change: %d reads, cached %v; want its cached answer", names[i], read, a.Cached)
		}
	}
}

// Run polls at once, then every interval, in one read each time, until ctx ends.
func TestGroupRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClock()
		names, stores, svcs := threeStores(c)
		var calls atomic.Int64
		g := NewGroup(names, svcs, batchOf(stores, &calls))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		time.Sleep(3*DefaultPollInterval + time.Millisecond)
		synctest.Wait()
		if n := calls.Load(); n != 4 {
			t.Errorf("%d batch reads in three intervals, want 4 (at once, then each interval)", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}
