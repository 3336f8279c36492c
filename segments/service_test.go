package segments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newTestService returns a service on a fake store synchronized now on a fake clock.
// Its clock is cfg.Now if set.
func newTestService(t *testing.T, cfg Config) (one, *fakeStore, *clock) {
	t.Helper()
	store, clk := newFakeStore(), newClock()
	store.setMeta(clk.Now(), nil)
	if cfg.Now == nil {
		cfg.Now = clk.Now
	}
	s := newOne(store, cfg)
	return s, store, clk
}

func TestLookup(t *testing.T) {
	s, store, _ := newTestService(t, Config{})
	store.put("alice", []string{"beta.g3"}, []string{"blocked.g1", "beta.g3"})
	tests := []struct {
		key  string
		want map[string]bool
	}{
		{"alice", map[string]bool{"beta.g3": true, "blocked.g1": false}},
		{"nobody", map[string]bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			r := s.LookupHash(context.Background(), Hash(tt.key))
			if r.Err != nil || r.Status != Healthy {
				t.Fatalf("status %s, err %v", r.Status, r.Err)
			}
			if r.ContextHash != Hash(tt.key) {
				t.Errorf("ContextHash = %q, want %q", r.ContextHash, Hash(tt.key))
			}
			if diff := cmp.Diff(tt.want, mapOf(r.Membership)); diff != "" {
				t.Errorf("membership (-want +got):\n%s", diff)
			}
		})
	}
}

// A ref that is not UTF-8 cannot be answered in JSON without changing it: that context's
// lookup fails instead, uncached, and the others in its read are answered.
func TestRefsThatAreNotUTF8FailTheirContext(t *testing.T) {
	s, store, _ := newTestService(t, Config{})
	store.put("mallory", []string{"beta\xff.g1"}, nil)
	store.put("alice", []string{"beta.g3"}, nil)
	got := s.LookupBatch(context.Background(), []string{Hash("mallory"), Hash("alice")})
	if !errors.Is(got[0].Err, ErrInvalidData) || got[0].Status != StoreError || got[0].Membership.Len() != 0 {
		t.Errorf("mallory: %+v, want ErrInvalidData and STORE_ERROR", got[0])
	}
	if got[1].Err != nil || got[1].Membership.Len() != 1 {
		t.Errorf("alice: %+v", got[1])
	}
	reads := store.reads.Load()
	if r := s.LookupHash(context.Background(), Hash("mallory")); !errors.Is(r.Err, ErrInvalidData) {
		t.Errorf("again: %+v", r)
	}
	if store.reads.Load() != reads+1 {
		t.Error("the failed lookup was cached")
	}
}

func TestCache(t *testing.T) {
	ctx := context.Background()
	t.Run("hit, then expiry after TTL", func(t *testing.T) {
		s, store, clk := newTestService(t, Config{CacheSize: 10, CacheTTL: 5 * time.Second})
		store.put("alice", []string{"a.g1"}, nil)
		if r := s.LookupHash(ctx, Hash("alice")); r.Cached {
			t.Fatal("first lookup came from the cache")
		}
		store.put("alice", []string{"b.g1"}, nil) // a change the cache hides until expiry
		clk.Add(5*time.Second - time.Nanosecond)
		r := s.LookupHash(ctx, Hash("alice"))
		if !r.Cached || r.ContextHash != Hash("alice") {
			t.Fatalf("lookup within TTL: cached=%v hash=%q", r.Cached, r.ContextHash)
		}
		if _, listed := mapOf(r.Membership)["a.g1"]; !listed {
			t.Errorf("cached answer %v, want the first read's", mapOf(r.Membership))
		}
		clk.Add(time.Nanosecond)
		r = s.LookupHash(ctx, Hash("alice"))
		if r.Cached {
			t.Fatal("lookup at TTL came from the cache")
		}
		if _, listed := mapOf(r.Membership)["b.g1"]; !listed {
			t.Errorf("after expiry got %v, want the new data", mapOf(r.Membership))
		}
		if got := store.reads.Load(); got != 2 {
			t.Errorf("store reads = %d, want 2", got)
		}
	})
	t.Run("no membership is cached", func(t *testing.T) {
		s, store, _ := newTestService(t, Config{})
		s.LookupHash(ctx, Hash("nobody"))
		if r := s.LookupHash(ctx, Hash("nobody")); !r.Cached || r.Membership != (Membership{}) {
			t.Errorf("second lookup: cached=%v membership=%v", r.Cached, mapOf(r.Membership))
		}
		if got := store.reads.Load(); got != 1 {
			t.Errorf("store reads = %d, want 1", got)
		}
	})
	t.Run("errors are not cached", func(t *testing.T) {
		s, store, _ := newTestService(t, Config{})
		store.failRead("alice", errBoom)
		if r := s.LookupHash(ctx, Hash("alice")); r.Status != StoreError || !errors.Is(r.Err, errBoom) {
			t.Fatalf("failed read: status %s, err %v", r.Status, r.Err)
		}
		store.failRead("alice", nil)
		if r := s.LookupHash(ctx, Hash("alice")); r.Cached || r.Status != Healthy {
			t.Errorf("after the failure: cached=%v status=%s", r.Cached, r.Status)
		}
		if got := store.reads.Load(); got != 2 {
			t.Errorf("store reads = %d, want 2", got)
		}
	})
	t.Run("size bound", func(t *testing.T) {
		s, _, _ := newTestService(t, Config{CacheSize: 10, CacheTTL: time.Hour})
		for i := range 100 {
			s.LookupHash(ctx, Hash(strconv.Itoa(i)))
			if got := s.CacheLen(); got > 10 {
				t.Fatalf("CacheLen = %d after %d lookups, over the bound of 10", got, i+1)
			}
		}
		if r := s.LookupHash(ctx, Hash("99")); !r.Cached {
			t.Error("the latest entry was not cached")
		}
		if r := s.LookupHash(ctx, Hash("0")); r.Cached {
			t.Error("the oldest of 100 entries is still cached in a cache of 10")
		}
	})
	t.Run("off", func(t *testing.T) {
		s, store, _ := newTestService(t, Config{NoCache: true})
		s.LookupHash(ctx, Hash("a"))
		if r := s.LookupHash(ctx, Hash("a")); r.Cached {
			t.Error("cache off, but the lookup was cached")
		}
		if got := store.reads.Load(); got != 2 {
			t.Errorf("store reads = %d, want 2", got)
		}
		if n := s.CacheLen(); n != 0 {
			t.Errorf("cache off, but it holds %d entries", n)
		}
	})
}

func TestConcurrentMissesShareOneRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100
		s, store, _ := newTestService(t, Config{NoCache: true}) // no cache: only the shared read can save reads
		s.Poll(context.Background())
		store.put("alice", []string{"a.g1"}, nil)
		store.block = make(chan struct{})
		answers := make([]Answer, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { answers[i] = s.LookupHash(context.Background(), Hash("alice")) })
		}
		synctest.Wait() // every caller waits on the read
		close(store.block)
		wg.Wait()
		if got := store.reads.Load(); got != 1 {
			t.Errorf("store reads = %d for %d concurrent misses, want 1", got, n)
		}
		for i, r := range answers {
			if r.Err != nil || r.Membership.Len() != 1 {
				t.Fatalf("answer %d: %v, %v", i, mapOf(r.Membership), r.Err)
			}
		}
	})
}

func TestLookupBatch(t *testing.T) {
	ctx := context.Background()
	s, store, _ := newTestService(t, Config{})
	store.put("alice", []string{"a.g1"}, nil)
	store.put("bob", nil, []string{"a.g1"})
	store.failRead("broken", errBoom)
	s.LookupHash(ctx, Hash("bob")) // cached before the batch
	readsBefore := store.reads.Load()

	hashes := []string{Hash("alice"), Hash("bob"), Hash("alice"), Hash("nobody"), Hash("alice"), Hash("broken")}
	results := s.LookupBatch(ctx, hashes)
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
		gots = append(gots, got{r.ContextHash, mapOf(r.Membership), r.Status, r.Cached, r.Err != nil})
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
	if all := s.LookupBatch(ctx, []string{Hash("alice"), Hash("bob")}); !all[0].Cached || !all[1].Cached {
		t.Errorf("a batch of cached contexts: %+v, want both from the cache", all)
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
		wantErr   error
	}{
		{name: "fresh", synced: time.Second, wantAvail: true, wantLook: Healthy},
		{name: "just under staleAfter", synced: staleAfter - time.Millisecond, wantAvail: true, wantLook: Healthy},
		{name: "at staleAfter", synced: staleAfter, wantAvail: true, wantStale: true, wantLook: Stale},
		{name: "never synchronized", wantAvail: true, wantStale: true, wantLook: Stale},
		{name: "in the future", synced: time.Hour, future: true, wantAvail: true, wantLook: Healthy},
		{name: "unavailable: invalid metadata", synced: time.Second, metaErr: fmt.Errorf("%w: %w", ErrInvalidMetadata, errBoom),
			wantStale: true, wantLook: StoreError},
		{name: "unavailable: the poll failed", synced: time.Second, metaErr: errBoom, wantStale: true, wantLook: StoreError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, store, clk := newTestService(t, Config{StaleAfter: staleAfter})
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
			if r := s.LookupHash(ctx, Hash("alice")); r.Status != tt.wantLook || !errors.Is(r.Err, tt.wantErr) {
				t.Errorf("lookup status = %s (err %v), want %s (err %v)", r.Status, r.Err, tt.wantLook, tt.wantErr)
			}
		})
	}
}

func TestStatusGoesStaleAsTimePasses(t *testing.T) {
	ctx := context.Background()
	s, _, clk := newTestService(t, Config{StaleAfter: time.Minute})
	if st := s.Poll(ctx); st.Stale {
		t.Fatal("stale right after synchronization")
	}
	clk.Add(time.Minute)
	if st := s.Poll(ctx); !st.Stale {
		t.Fatal("not stale a minute later")
	}
}

// TestLastErrorAtIsTheOutagesStart: lastErrorAt is when the store became unavailable, however
// the error's text changes during the outage (a new local port, a new request ID); lastError is
// the last poll's.
func TestLastErrorAtIsTheOutagesStart(t *testing.T) {
	ctx := context.Background()
	s, store, clk := newTestService(t, Config{})
	s.Poll(ctx)
	store.setMeta(time.Time{}, errors.New("read tcp 127.0.0.1:41000: i/o timeout"))
	clk.Add(time.Second)
	began := clk.Now()
	s.Poll(ctx)
	store.setMeta(time.Time{}, errors.New("read tcp 127.0.0.1:41002: i/o timeout"))
	clk.Add(time.Second)
	if st := s.Poll(ctx); !st.LastErrorAt.Equal(began) || !strings.Contains(st.LastError, "41002") {
		t.Errorf("during the outage: lastError %q at %v, want the last poll's error at %v", st.LastError, st.LastErrorAt, began)
	}
	store.setMeta(clk.Now(), nil)
	s.Poll(ctx)
	store.setMeta(time.Time{}, errBoom)
	clk.Add(time.Second)
	if st := s.Poll(ctx); !st.LastErrorAt.Equal(clk.Now()) {
		t.Errorf("a second outage: lastErrorAt %v, want %v", st.LastErrorAt, clk.Now())
	}
}

func TestUnavailableKeepsLastSynchronization(t *testing.T) {
	ctx := context.Background()
	s, store, clk := newTestService(t, Config{})
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
	s, store, _ := newTestService(t, Config{})
	if _, ok := s.Status(); ok {
		t.Fatal("status known before any poll")
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if r := s.LookupHash(ctx, Hash("alice")); r.Status != Healthy {
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
	s.LookupHash(ctx, Hash("bob"))
	if got := store.metaReads.Load(); got != 1 {
		t.Errorf("metadata reads = %d after a later lookup, want still 1", got)
	}
}

func TestPollIntervalCappedAtStaleAfter(t *testing.T) {
	s := newOne(newFakeStore(), Config{PollInterval: time.Hour, StaleAfter: time.Minute})
	if got := s.cfg.PollInterval; got != time.Minute {
		t.Errorf("poll interval = %v, want 1m", got)
	}
	s = newOne(newFakeStore(), Config{})
	if s.cfg.PollInterval != DefaultPollInterval || s.StaleAfter() != DefaultStaleAfter {
		t.Errorf("defaults: %v, %v", s.cfg.PollInterval, s.StaleAfter())
	}
}

func TestChangesOnly(t *testing.T) {
	ctx := context.Background()
	s, store, clk := newTestService(t, Config{StaleAfter: time.Minute})
	ch := s.Changes()
	next := func() (StoreStatus, bool) {
		select {
		case <-ch:
			ch = s.Changes()
			st, _ := s.Status()
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
}

func TestRunPollsAtStartAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, store, _ := newTestService(t, Config{PollInterval: time.Millisecond, StaleAfter: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()
		if got := store.metaReads.Load(); got != 1 {
			t.Errorf("%d polls at start, want 1", got)
		}
		time.Sleep(2 * time.Millisecond) // fake time: two poll intervals
		synctest.Wait()
		if got := store.metaReads.Load(); got != 3 {
			t.Errorf("%d polls after two intervals, want 3", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// Ending Run while a poll waits for the store is no failed poll: the status stays as the last
// poll left it, and nothing is reported (shutdown used to log the store as unavailable).
func TestRunEndingMidPollRecordsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &countingObserver{}
		store := &ctxMetaStore{fakeStore: newFakeStore()}
		store.setMeta(time.Now(), nil)
		s := newOne(store, Config{PollInterval: time.Hour, LookupTimeout: time.Hour, Observer: func(*Environment) Observer { return obs }})
		s.Poll(context.Background())
		before, _ := s.Status()
		polls := obs.polls.Load()
		store.hang.Store(true)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait() // Run's first poll waits in Metadata
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		if st, _ := s.Status(); st != before {
			t.Errorf("status after Run ended mid-poll: %+v, want it unchanged: %+v", st, before)
		}
		if got := obs.polls.Load() - polls; got != 0 {
			t.Errorf("%d polls reported after Run ended mid-poll, want 0", got)
		}
	})
}

// ctxMetaStore is a fakeStore whose Metadata, once hang is set, waits for its context to end.
type ctxMetaStore struct {
	*fakeStore
	hang atomic.Bool
}

func (c *ctxMetaStore) Metadata(ctx context.Context) (Metadata, error) {
	if c.hang.Load() {
		<-ctx.Done()
		return Metadata{}, ctx.Err()
	}
	return c.fakeStore.Metadata(ctx)
}

// countingObserver records what the service reports.
type countingObserver struct {
	lookups, cached, reads, polls, changes, dataChanges atomic.Int64
}

func (o *countingObserver) Lookup(_ LookupStatus, cached bool) {
	o.lookups.Add(1)
	if cached {
		o.cached.Add(1)
	}
}
func (o *countingObserver) StoreRead(string, time.Duration, error) { o.reads.Add(1) }
func (o *countingObserver) DataChanged()                           { o.dataChanges.Add(1) }
func (o *countingObserver) StatusPolled(_ StoreStatus, _ error, changed bool) {
	o.polls.Add(1)
	if changed {
		o.changes.Add(1)
	}
}

func TestObserver(t *testing.T) {
	obs := &countingObserver{}
	s, _, _ := newTestService(t, Config{Observer: func(*Environment) Observer { return obs }})
	ctx := context.Background()
	s.LookupHash(ctx, Hash("a"))
	s.LookupHash(ctx, Hash("a"))
	s.LookupBatch(ctx, []string{Hash("a"), Hash("b")})
	s.Poll(ctx)
	got := [5]int64{obs.lookups.Load(), obs.cached.Load(), obs.reads.Load(), obs.polls.Load(), obs.changes.Load()}
	// lookups a, a, a, b; cached: 2nd a and batch a; reads: metadata x2, memberships x2.
	if want := [5]int64{4, 2, 4, 2, 1}; got != want {
		t.Errorf("lookups, cached, reads, polls, changes = %v, want %v", got, want)
	}
}

// A poll that reads the store first but finishes last must not overwrite the status of the
// poll after it with older data.
func TestPollsAreStoredInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, store, clk := newTestService(t, Config{LookupTimeout: time.Hour})
		older, newer := clk.Now().Add(-time.Minute), clk.Now()
		release := make(chan struct{})
		store.mu.Lock()
		store.synced, store.metaBlock = older, release
		store.mu.Unlock()
		go s.Poll(ctx) // reads older, then waits
		synctest.Wait()
		store.mu.Lock()
		store.synced, store.metaBlock = newer, nil
		store.mu.Unlock()
		done := make(chan StoreStatus)
		go func() { done <- s.Poll(ctx) }() // would read newer at once
		synctest.Wait()
		close(release)
		if st := <-done; !st.LastSynchronized.Equal(newer) {
			t.Errorf("second poll returned %v, want %v", st.LastSynchronized, newer)
		}
		synctest.Wait() // both polls are done
		if st, _ := s.Status(); !st.LastSynchronized.Equal(newer) {
			t.Errorf("status after both polls: last synchronized %v, want the later poll's %v", st.LastSynchronized, newer)
		}
	})
}

// A batch's store read waits for a read slot like a single lookup's: the bound on reads in
// flight holds for both.
func TestBatchesWaitForAReadSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, store, _ := newTestService(t, Config{NoCache: true, ReadsInFlight: 1, LookupTimeout: time.Hour})
		s.Poll(ctx)
		store.block = make(chan struct{})
		go s.LookupHash(ctx, Hash("a"))
		synctest.Wait() // the lookup's read is inside the store
		done := make(chan []Answer)
		go func() { done <- s.LookupBatch(ctx, []string{Hash("b"), Hash("c")}) }()
		synctest.Wait()
		if got := store.reads.Load(); got != 1 {
			t.Errorf("store reads = %d while the only read slot is taken, want 1", got)
		}
		store.mu.Lock()
		close(store.block)
		store.block = nil
		store.mu.Unlock()
		for _, r := range <-done {
			if r.Err != nil {
				t.Errorf("batch result: %v", r.Err)
			}
		}
		if got := store.maxFlight.Load(); got != 1 {
			t.Errorf("%d store reads ran at once, over the bound of 1", got)
		}
	})
}

func TestStatusBeforeFirstPoll(t *testing.T) {
	s, _, _ := newTestService(t, Config{})
	st, polled := s.Status()
	if polled || st.Available || !st.Stale {
		t.Errorf("before any poll: %+v, polled %v; want unavailable and stale (never synchronized)", st, polled)
	}
}

// A failed poll (a timeout, say) stops no read: while the store is unavailable, lookups that miss
// the cache still read it and answer what it holds with STORE_ERROR, as the SDKs' do, so that one
// slow poll costs no membership its store can give; Run polls every second until the store answers.
func TestUnavailableStoreIsStillRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, store, clk := newTestService(t, Config{PollInterval: time.Hour, StaleAfter: time.Hour})
		store.put("alice", []string{"beta.g1"}, nil)
		s.LookupHash(ctx, Hash("cached"))
		store.setMeta(clk.Now(), errBoom)
		if st := s.Poll(ctx); st.Available {
			t.Fatalf("status after a failed poll: %+v", st)
		}
		readsBefore := store.reads.Load()
		for _, r := range append(s.LookupBatch(ctx, []string{Hash("alice"), Hash("b")}), s.LookupHash(ctx, Hash("alice"))) {
			if r.Status != StoreError || r.Err != nil {
				t.Errorf("lookup while unavailable: %s, %v; want a read answered STORE_ERROR", r.Status, r.Err)
			}
		}
		if r := s.LookupHash(ctx, Hash("cached")); !r.Cached || r.Status != StoreError || r.Err != nil {
			t.Errorf("cached lookup while unavailable: cached %v, %s, %v", r.Cached, r.Status, r.Err)
		}
		if got := store.reads.Load() - readsBefore; got == 0 {
			t.Error("no store read while unavailable")
		}
		go s.Run(ctx)
		synctest.Wait() // Run's first poll fails too
		store.setMeta(clk.Now(), nil)
		time.Sleep(time.Second) // fake time: Run's next poll, a second later, not an hour
		synctest.Wait()
		if st, _ := s.Status(); !st.Available {
			t.Errorf("status a second after the store came back: %+v, want available", st)
		}
	})
}

// Once a poll and a read have both failed, the store is down: lookups that miss the cache fail
// at once, without a read, so that a store that hangs is not dialled again by every miss; the
// cache still answers. A read that fails only for one context's data does not count, and a
// poll that answers ends it.
func TestDownStoreFailsFast(t *testing.T) {
	ctx := context.Background()
	s, store, clk := newTestService(t, Config{})
	s.LookupHash(ctx, Hash("cached"))
	store.failRead("bad-data", fmt.Errorf("%w: a ref is not UTF-8", ErrInvalidData))
	store.setMeta(clk.Now(), errBoom)
	s.Poll(ctx)
	if r := s.LookupHash(ctx, Hash("bad-data")); !errors.Is(r.Err, ErrInvalidData) {
		t.Fatalf("read of bad data: %v", r.Err)
	}
	if r := s.LookupHash(ctx, Hash("a")); r.Err != nil {
		t.Fatalf("a lookup after a read failed for its data: %v, want it read", r.Err)
	}
	store.failRead("b", errBoom)
	if r := s.LookupHash(ctx, Hash("b")); !errors.Is(r.Err, errBoom) {
		t.Fatalf("the failing read: %v", r.Err)
	}
	readsBefore := store.reads.Load()
	for _, r := range append(s.LookupBatch(ctx, []string{Hash("c"), Hash("d")}), s.LookupHash(ctx, Hash("e"))) {
		if r.Status != StoreError || !errors.Is(r.Err, ErrStoreUnreachable) {
			t.Errorf("lookup while down: %s, %v; want ErrStoreUnreachable", r.Status, r.Err)
		}
	}
	if r := s.LookupHash(ctx, Hash("cached")); !r.Cached || r.Status != StoreError || r.Err != nil {
		t.Errorf("cached lookup while down: cached %v, %s, %v", r.Cached, r.Status, r.Err)
	}
	if got := store.reads.Load() - readsBefore; got != 0 {
		t.Errorf("store reads while down = %d, want 0", got)
	}
	store.setMeta(clk.Now(), nil)
	s.Poll(ctx)
	store.setMeta(clk.Now(), errBoom) // a failed poll again, but no read has failed since the last good one
	s.Poll(ctx)
	if r := s.LookupHash(ctx, Hash("e")); r.Err != nil {
		t.Errorf("lookup after a poll answered: %v, want it read", r.Err)
	}
}

// A lookup answers within the lookup timeout however long the store takes, and never later
// with a success.
func TestLookupTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, store, _ := newTestService(t, Config{NoCache: true, LookupTimeout: time.Second})
		s.Poll(ctx)
		store.block = make(chan struct{})
		start := time.Now()
		r := s.LookupHash(ctx, Hash("alice"))
		// A deadline exceeded, as errors.Is tells it: logs and metrics give it that code.
		if r.Status != StoreError || !errors.Is(r.Err, context.DeadlineExceeded) || !strings.Contains(r.Err.Error(), "no answer within 1s") {
			t.Errorf("lookup of a hung store: %s, %v", r.Status, r.Err)
		}
		if elapsed := time.Since(start); elapsed != time.Second {
			t.Errorf("answered after %v (fake time), want exactly the timeout of 1s", elapsed)
		}
		close(store.block)
	})
}

// recordHandler is a slog.Handler that hands every record to a function.
type recordHandler func(slog.Record)

func (h recordHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error { h(r); return nil }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h recordHandler) WithGroup(string) slog.Handler                 { return h }

// Config.ErrorCode names the store's errors in the log line of the store becoming unavailable,
// once per failure period: a second failed poll logs nothing, and a failed read nothing (the
// Observer counts failed reads).
func TestErrorCodeIsLogged(t *testing.T) {
	var mu sync.Mutex
	codes := map[string][]string{}
	log := slog.New(recordHandler(func(r slog.Record) {
		mu.Lock()
		defer mu.Unlock()
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "code" {
				codes[r.Message] = append(codes[r.Message], a.Value.String())
			}
			return true
		})
	}))
	ctx := context.Background()
	s, store, _ := newTestService(t, Config{NoCache: true, Logger: log, ErrorCode: func(err error) string {
		if errors.Is(err, errBoom) {
			return "Boom"
		}
		return "other"
	}})
	s.Poll(ctx)
	store.failRead("alice", errBoom)
	s.LookupHash(ctx, Hash("alice"))
	store.setMeta(time.Time{}, errBoom)
	s.Poll(ctx)
	s.Poll(ctx)
	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{"big segment store unavailable": {"Boom"}}
	if diff := cmp.Diff(want, codes); diff != "" {
		t.Errorf("codes logged (-want +got):\n%s", diff)
	}
}

func TestValidateName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "0": true, "prod-eu_2": true, strings.Repeat("a", 63): true,
		"": false, "-a": false, "_a": false, "Prod": false, "a.b": false, "a/b": false, "é": false,
		"a b": false, strings.Repeat("a", 64): false,
	} {
		if got := ValidateName(name) == nil; got != want {
			t.Errorf("ValidateName(%q) accepts: %v, want %v", name, got, want)
		}
	}
}

func TestNames(t *testing.T) {
	envs := []*Environment{{Name: "production", Prefix: "ld-prod"}, {Name: "staging", Prefix: "ld-staging"}}
	if diff := cmp.Diff([]string{"production", "staging"}, Names(envs)); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	if got := Names(nil); len(got) != 0 {
		t.Errorf("Names(nil) = %q", got)
	}
}

func TestValidatePrefix(t *testing.T) {
	for prefix, want := range map[string]bool{
		"": true, "launchdarkly": true, "ld-prod:eu": true, "é": true,
		"ld-prod\n": false, " ld-prod": false, "ld prod": false, "ld\tprod": false, "ld\x00prod": false, "ld\u00a0prod": false,
	} {
		if got := ValidatePrefix(prefix) == nil; got != want {
			t.Errorf("ValidatePrefix(%q) accepts: %v, want %v", prefix, got, want)
		}
	}
}
