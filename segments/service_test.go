package segments

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newTestService returns a service on a fake store synchronized now on a fake clock.
func newTestService(t *testing.T, opts ...Option) (*Service, *fakeStore, *clock) {
	t.Helper()
	store, clk := newFakeStore(), newClock()
	store.setMeta(clk.Now(), nil)
	s := New(store, append([]Option{WithClock(clk.Now)}, opts...)...)
	return s, store, clk
}

func TestLookup(t *testing.T) {
	s, store, _ := newTestService(t)
	store.put("alice", []string{"beta.g3"}, []string{"blocked.g1", "beta.g3"})
	tests := []struct {
		key  string
		want map[string]bool
	}{
		{"alice", map[string]bool{"beta.g3": true, "blocked.g1": false}},
		{"nobody", map[string]bool{}},
	}
	for _, tt := range tests {
		r := s.Lookup(context.Background(), tt.key)
		if r.Err != nil || r.Status != Healthy {
			t.Fatalf("%s: status %s, err %v", tt.key, r.Status, r.Err)
		}
		if r.ContextHash != Hash(tt.key) {
			t.Errorf("%s: ContextHash = %q", tt.key, r.ContextHash)
		}
		if diff := cmp.Diff(tt.want, r.Membership.Map()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.key, diff)
		}
	}
	r := s.LookupHash(context.Background(), Hash("alice"))
	if r.ContextHash != Hash("alice") || r.Membership.Len() != 2 {
		t.Errorf("LookupHash: %+v", r)
	}
}

func TestCache(t *testing.T) {
	ctx := context.Background()
	t.Run("hit, then expiry after TTL", func(t *testing.T) {
		s, store, clk := newTestService(t, WithCache(10, 5*time.Second))
		store.put("alice", []string{"a.g1"}, nil)
		if r := s.Lookup(ctx, "alice"); r.Cached {
			t.Fatal("first lookup came from the cache")
		}
		store.put("alice", []string{"b.g1"}, nil) // a change the cache hides until expiry
		clk.Add(5*time.Second - time.Nanosecond)
		r := s.Lookup(ctx, "alice")
		if !r.Cached || r.ContextHash != Hash("alice") {
			t.Fatalf("lookup within TTL: cached=%v hash=%q", r.Cached, r.ContextHash)
		}
		if _, listed := r.Membership.Check("a.g1"); !listed {
			t.Errorf("cached answer %v, want the first read's", r.Membership.Map())
		}
		clk.Add(time.Nanosecond)
		r = s.Lookup(ctx, "alice")
		if r.Cached {
			t.Fatal("lookup at TTL came from the cache")
		}
		if _, listed := r.Membership.Check("b.g1"); !listed {
			t.Errorf("after expiry got %v, want the new data", r.Membership.Map())
		}
		if got := store.reads.Load(); got != 2 {
			t.Errorf("store reads = %d, want 2", got)
		}
	})
	t.Run("no membership is cached", func(t *testing.T) {
		s, store, _ := newTestService(t)
		s.Lookup(ctx, "nobody")
		if r := s.Lookup(ctx, "nobody"); !r.Cached || !r.Membership.IsEmpty() {
			t.Errorf("second lookup: cached=%v membership=%v", r.Cached, r.Membership.Map())
		}
		if got := store.reads.Load(); got != 1 {
			t.Errorf("store reads = %d, want 1", got)
		}
	})
	t.Run("errors are not cached", func(t *testing.T) {
		s, store, _ := newTestService(t)
		store.failRead("alice", errBoom)
		if r := s.Lookup(ctx, "alice"); r.Status != StoreError || !errors.Is(r.Err, errBoom) {
			t.Fatalf("failed read: status %s, err %v", r.Status, r.Err)
		}
		store.failRead("alice", nil)
		if r := s.Lookup(ctx, "alice"); r.Cached || r.Status != Healthy {
			t.Errorf("after the failure: cached=%v status=%s", r.Cached, r.Status)
		}
		if got := store.reads.Load(); got != 2 {
			t.Errorf("store reads = %d, want 2", got)
		}
	})
	t.Run("keys and hashes are cached apart", func(t *testing.T) {
		s, _, _ := newTestService(t)
		s.Lookup(ctx, "alice")
		if r := s.LookupHash(ctx, Hash("alice")); r.Cached {
			t.Error("hash lookup hit the entry cached by key")
		}
		if r := s.LookupHash(ctx, Hash("alice")); !r.Cached || r.ContextHash != Hash("alice") {
			t.Errorf("second hash lookup: cached=%v hash=%q", r.Cached, r.ContextHash)
		}
	})
	t.Run("size bound", func(t *testing.T) {
		s, store, _ := newTestService(t, WithCache(3, time.Hour))
		for _, k := range []string{"a", "b", "c", "d"} {
			s.Lookup(ctx, k)
		}
		if got := s.CacheLen(); got != 3 {
			t.Fatalf("CacheLen = %d, want 3", got)
		}
		if r := s.Lookup(ctx, "d"); r.Cached {
			t.Error("an entry beyond the bound was cached")
		}
		if r := s.Lookup(ctx, "a"); !r.Cached {
			t.Error("an entry within the bound was dropped")
		}
		if got := store.reads.Load(); got != 5 {
			t.Errorf("store reads = %d, want 5", got)
		}
	})
	t.Run("a full cache admits again once expired entries are purged", func(t *testing.T) {
		s, _, _ := newTestService(t, WithCache(2, time.Millisecond))
		s.Lookup(ctx, "a")
		s.Lookup(ctx, "b")
		deadline := time.Now().Add(5 * time.Second)
		for s.CacheLen() > 0 { // go-cache expires on the real clock
			if time.Now().After(deadline) {
				t.Fatalf("CacheLen = %d after purging for 5s", s.CacheLen())
			}
			s.cache.purge()
			time.Sleep(time.Millisecond)
		}
		s.Lookup(ctx, "c")
		if got := s.CacheLen(); got != 1 {
			t.Errorf("CacheLen = %d after purge and one lookup, want 1", got)
		}
	})
	t.Run("off", func(t *testing.T) {
		for _, opt := range []Option{WithCache(0, time.Second), WithCache(10, 0)} {
			s, store, _ := newTestService(t, opt)
			s.Lookup(ctx, "a")
			if r := s.Lookup(ctx, "a"); r.Cached {
				t.Error("cache off, but the lookup was cached")
			}
			if got := store.reads.Load(); got != 2 {
				t.Errorf("store reads = %d, want 2", got)
			}
		}
	})
}

func TestConcurrentMissesShareOneRead(t *testing.T) {
	const n = 100
	s, store, _ := newTestService(t, WithCache(0, 0)) // no cache: only the shared read can save reads
	s.Poll(context.Background())
	store.put("alice", []string{"a.g1"}, nil)
	store.block = make(chan struct{})
	var waiting sync.WaitGroup
	waiting.Add(n)
	s.joined = waiting.Done

	var wg sync.WaitGroup
	results := make([]Result, n)
	for i := range n {
		wg.Go(func() { results[i] = s.Lookup(context.Background(), "alice") })
	}
	waiting.Wait() // every caller waits on the read
	close(store.block)
	wg.Wait()
	if got := store.reads.Load(); got != 1 {
		t.Errorf("store reads = %d for %d concurrent misses, want 1", got, n)
	}
	for i, r := range results {
		if r.Err != nil || r.Membership.Len() != 1 {
			t.Fatalf("result %d: %v, %v", i, r.Membership.Map(), r.Err)
		}
	}
}

func TestCancelledCallerDoesNotFailOthers(t *testing.T) {
	s, store, _ := newTestService(t, WithCache(0, 0))
	s.Poll(context.Background())
	store.put("alice", []string{"a.g1"}, nil)
	store.block = make(chan struct{})
	var waiting sync.WaitGroup
	waiting.Add(2)
	s.joined = waiting.Done

	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan Result)
	go func() { first <- s.Lookup(ctx, "alice") }()
	second := make(chan Result)
	go func() { second <- s.Lookup(context.Background(), "alice") }()
	waiting.Wait()
	cancel()
	if r := <-first; !errors.Is(r.Err, context.Canceled) || r.Status != StoreError {
		t.Errorf("cancelled caller: status %s, err %v", r.Status, r.Err)
	}
	close(store.block)
	if r := <-second; r.Err != nil || r.Membership.Len() != 1 {
		t.Errorf("other caller: %v, %v", r.Membership.Map(), r.Err)
	}
}

func TestLookupBatch(t *testing.T) {
	ctx := context.Background()
	s, store, _ := newTestService(t)
	store.put("alice", []string{"a.g1"}, nil)
	store.put("bob", nil, []string{"a.g1"})
	store.failRead("broken", errBoom)
	s.Lookup(ctx, "bob") // cached by key
	readsBefore := store.reads.Load()

	queries := []Query{{Key: "alice"}, {Key: "bob"}, {Hash: Hash("alice")}, {Key: "nobody"}, {Key: "alice"}, {Key: "broken"}}
	results := s.LookupBatch(ctx, queries)
	type got struct {
		Hash   string
		Refs   map[string]bool
		Status LookupStatus
		Cached bool
		Err    bool
	}
	want := []got{
		{Hash("alice"), map[string]bool{"a.g1": true}, Healthy, false, false},
		{Hash("bob"), map[string]bool{"a.g1": false}, Healthy, true, false},
		{Hash("alice"), map[string]bool{"a.g1": true}, Healthy, false, false},
		{Hash("nobody"), map[string]bool{}, Healthy, false, false},
		{Hash("alice"), map[string]bool{"a.g1": true}, Healthy, false, false},
		{Hash("broken"), map[string]bool{}, StoreError, false, true},
	}
	var gots []got
	for _, r := range results {
		gots = append(gots, got{r.ContextHash, r.Membership.Map(), r.Status, r.Cached, r.Err != nil})
	}
	if diff := cmp.Diff(want, gots); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if got := store.reads.Load() - readsBefore; got != 1 {
		t.Errorf("store reads for the batch = %d, want 1", got)
	}
	if got := store.hashes.Load(); got != 1+3 { // bob before; then alice, nobody, broken once each
		t.Errorf("hashes read = %d, want 4", got)
	}
	if r := s.LookupHash(ctx, Hash("alice")); !r.Cached {
		t.Error("batch did not cache the hash lookup")
	}
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	const staleAfter = 2 * time.Minute
	tests := []struct {
		name      string
		synced    time.Duration // before now; 0 means never
		future    bool
		metaErr   error
		wantAvail bool
		wantStale bool
		wantLook  LookupStatus
	}{
		{name: "fresh", synced: time.Second, wantAvail: true, wantLook: Healthy},
		{name: "just under staleAfter", synced: staleAfter - time.Millisecond, wantAvail: true, wantLook: Healthy},
		{name: "at staleAfter", synced: staleAfter, wantAvail: true, wantStale: true, wantLook: Stale},
		{name: "never synchronized", wantAvail: true, wantStale: true, wantLook: Stale},
		{name: "in the future", synced: time.Hour, future: true, wantAvail: true, wantLook: Healthy},
		{name: "unavailable", synced: time.Second, metaErr: errBoom, wantStale: true, wantLook: StoreError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, store, clk := newTestService(t, WithStaleAfter(staleAfter))
			synced := time.Time{}
			if tt.synced != 0 {
				synced = clk.Now().Add(-tt.synced)
				if tt.future {
					synced = clk.Now().Add(tt.synced)
				}
			}
			store.setMeta(synced, tt.metaErr)
			st := s.Poll(ctx)
			if st.Available != tt.wantAvail || st.Stale != tt.wantStale {
				t.Errorf("status = available %v stale %v, want %v %v", st.Available, st.Stale, tt.wantAvail, tt.wantStale)
			}
			if r := s.Lookup(ctx, "alice"); r.Status != tt.wantLook || r.Err != nil {
				t.Errorf("lookup status = %s (err %v), want %s", r.Status, r.Err, tt.wantLook)
			}
		})
	}
}

func TestStatusGoesStaleAsTimePasses(t *testing.T) {
	ctx := context.Background()
	s, _, clk := newTestService(t, WithStaleAfter(time.Minute))
	if st := s.Poll(ctx); st.Stale {
		t.Fatal("stale right after synchronization")
	}
	clk.Add(time.Minute)
	if st := s.Poll(ctx); !st.Stale {
		t.Fatal("not stale a minute later")
	}
}

func TestUnavailableKeepsLastSynchronization(t *testing.T) {
	ctx := context.Background()
	s, store, clk := newTestService(t)
	synced := clk.Now()
	s.Poll(ctx)
	store.setMeta(time.Time{}, errBoom)
	st := s.Poll(ctx)
	if st.Available || !st.LastSynchronized.Equal(synced) || st.Stale {
		t.Errorf("status = %+v, want unavailable, not stale, last synchronized %v", st, synced)
	}
}

func TestFirstLookupPollsInline(t *testing.T) {
	ctx := context.Background()
	s, store, _ := newTestService(t)
	if _, ok := s.Status(); ok {
		t.Fatal("status known before any poll")
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if r := s.Lookup(ctx, "alice"); r.Status != Healthy {
				t.Errorf("first lookup status = %s, want HEALTHY", r.Status)
			}
		})
	}
	wg.Wait()
	if _, ok := s.Status(); !ok {
		t.Error("status unknown after the first lookup")
	}
	if got := store.metaReads.Load(); got != 1 {
		t.Errorf("metadata reads = %d for 20 first lookups, want 1", got)
	}
	s.Lookup(ctx, "bob")
	if got := store.metaReads.Load(); got != 1 {
		t.Errorf("metadata reads = %d after a later lookup, want still 1", got)
	}
}

func TestPollIntervalCappedAtStaleAfter(t *testing.T) {
	s := New(newFakeStore(), WithPollInterval(time.Hour), WithStaleAfter(time.Minute))
	if got := s.PollInterval(); got != time.Minute {
		t.Errorf("PollInterval = %v, want 1m", got)
	}
	s = New(newFakeStore())
	if s.PollInterval() != DefaultPollInterval || s.StaleAfter() != DefaultStaleAfter {
		t.Errorf("defaults: %v, %v", s.PollInterval(), s.StaleAfter())
	}
}

func TestSubscribeGetsChangesOnly(t *testing.T) {
	ctx := context.Background()
	s, store, clk := newTestService(t, WithStaleAfter(time.Minute))
	ch, cancel := s.Subscribe()
	defer cancel()
	next := func() (StoreStatus, bool) {
		select {
		case st := <-ch:
			return st, true
		default:
			return StoreStatus{}, false
		}
	}
	s.Poll(ctx)
	if st, ok := next(); !ok || !st.Available || st.Stale {
		t.Fatalf("first poll: %+v, %v", st, ok)
	}
	s.Poll(ctx)
	if st, ok := next(); ok {
		t.Fatalf("unchanged poll was reported: %+v", st)
	}
	store.setMeta(time.Time{}, errBoom)
	s.Poll(ctx)
	if st, ok := next(); !ok || st.Available {
		t.Fatalf("unavailable: %+v, %v", st, ok)
	}
	// A slow subscriber misses intermediate changes but gets the latest.
	store.setMeta(clk.Now(), nil)
	s.Poll(ctx) // available
	clk.Add(time.Minute)
	s.Poll(ctx) // stale
	if st, ok := next(); !ok || !st.Available || !st.Stale {
		t.Fatalf("latest after two changes: %+v, %v", st, ok)
	}
	if st, ok := next(); ok {
		t.Fatalf("more than the latest: %+v", st)
	}
	cancel()
	store.setMeta(time.Time{}, errBoom)
	s.Poll(ctx)
	if st, ok := next(); ok {
		t.Fatalf("change after cancel was delivered: %+v", st)
	}
}

func TestRunPollsAtStartAndStops(t *testing.T) {
	s, store, _ := newTestService(t, WithPollInterval(time.Millisecond), WithStaleAfter(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for store.metaReads.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d polls after 5s at a 1ms interval", store.metaReads.Load())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// countingObserver records what the service reports.
type countingObserver struct {
	lookups, cached, reads, polls, changes atomic.Int64
}

func (o *countingObserver) Lookup(_ LookupStatus, cached bool) {
	o.lookups.Add(1)
	if cached {
		o.cached.Add(1)
	}
}
func (o *countingObserver) StoreRead(string, time.Duration, error) { o.reads.Add(1) }
func (o *countingObserver) StatusPolled(_ StoreStatus, _ error, changed bool) {
	o.polls.Add(1)
	if changed {
		o.changes.Add(1)
	}
}

func TestObserver(t *testing.T) {
	obs := &countingObserver{}
	s, _, _ := newTestService(t, WithObserver(obs))
	ctx := context.Background()
	s.Lookup(ctx, "a")
	s.Lookup(ctx, "a")
	s.LookupBatch(ctx, []Query{{Key: "a"}, {Key: "b"}})
	s.Poll(ctx)
	got := [5]int64{obs.lookups.Load(), obs.cached.Load(), obs.reads.Load(), obs.polls.Load(), obs.changes.Load()}
	// lookups a, a, a, b; cached: 2nd a and batch a; reads: metadata x2, memberships x2.
	if want := [5]int64{4, 2, 4, 2, 1}; got != want {
		t.Errorf("lookups, cached, reads, polls, changes = %v, want %v", got, want)
	}
}
