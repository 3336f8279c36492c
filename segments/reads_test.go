package segments

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Lookups are read before Run, while it runs, while it stops and after: every miss is
// answered and no goroutine is left behind.
func TestLookupsAroundRun(t *testing.T) {
	for round := range 20 {
		s, _, _ := newTestService(t, Config{NoCache: true, PollInterval: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		start := make(chan struct{})
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range 8 {
			wg.Go(func() {
				<-start
				for j := range 20 {
					if r := s.LookupHash(context.Background(), Hash(strconv.Itoa(i)+"/"+strconv.Itoa(j))); r.Err != nil {
						failed.Add(1)
					}
				}
			})
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		close(start)
		wg.Go(cancel)
		wg.Wait()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := failed.Load(); n > 0 {
			t.Fatalf("round %d: %d lookups failed", round, n)
		}
	}
	goleak.VerifyNone(t)
}

// threeStores are production, staging and qa, each holding alice in a segment of its own; qa
// was never synchronized.
func threeStores(c *clock) (envs []Environment, stores []*fakeStore) {
	for i, n := range []string{"production", "staging", "qa"} {
		f := newFakeStore()
		f.put("alice", []string{n + ".g1"}, nil)
		if i < 2 {
			f.setMeta(c.Now(), nil)
		}
		f.cursor = "c1"
		stores = append(stores, f)
		envs = append(envs, Environment{Name: n, Prefix: "ld-" + n, Store: f})
	}
	return envs, stores
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

// threeEnvironments is a Service of threeStores, configured by cfg, whose polls read every
// store's metadata in one read.
func threeEnvironments(t *testing.T, cfg Config) (*Service, []*fakeStore, *atomic.Int64) {
	t.Helper()
	c := newClock()
	envs, stores := threeStores(c)
	var calls atomic.Int64
	cfg.Now, cfg.ReadMetadata = c.Now, batchOf(stores, &calls)
	s, err := New(envs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, stores, &calls
}

// A poll reads every environment's metadata in one read, and each keeps its own status.
func TestPollReadsEveryEnvironmentOnce(t *testing.T) {
	obs := &countingObserver{}
	s, stores, calls := threeEnvironments(t, Config{Observer: func(*Environment) Observer { return obs }})
	s.Poll(context.Background())
	if calls.Load() != 1 || obs.reads.Load() != 1 || obs.polls.Load() != 3 {
		t.Fatalf("a poll: %d batch reads, %d observed, %d statuses polled; want one, one (the histogram's) and three",
			calls.Load(), obs.reads.Load(), obs.polls.Load())
	}
	for _, e := range s.Environments() {
		st, polled := e.Status()
		if !polled || !st.Available || st.Stale != (e.Name == "qa") {
			t.Errorf("%s: %+v", e.Name, st)
		}
	}
	if ready, why := s.Readiness(); !ready {
		t.Errorf("readiness: %s (stale data keeps an instance ready)", why)
	}
	stores[1].setMeta(time.Time{}, errBoom)
	s.Poll(context.Background())
	if ready, why := s.Readiness(); ready || !strings.Contains(why, "staging: the Big Segment store is unavailable") || strings.Contains(why, "production") {
		t.Errorf("with staging unavailable: %v %q", ready, why)
	}
	s.Drain()
	if ready, why := s.Readiness(); ready || why != "shutting down" {
		t.Errorf("draining: %v %q", ready, why)
	}
}

// A change in one environment (a new cursor) drops only that environment's cached answers,
// and one signal tells a subscriber of it.
func TestChangeDropsOnlyItsEnvironmentsCache(t *testing.T) {
	s, stores, _ := threeEnvironments(t, Config{})
	ctx := context.Background()
	s.Poll(ctx)
	changes := s.Changes()
	for _, e := range s.Environments() {
		e.LookupHash(ctx, Hash("alice"))
	}
	stores[0].patch("alice", []string{"production.g2"}, "c2")
	s.Poll(ctx)
	select {
	case <-changes:
	default:
		t.Error("no signal of production's change")
	}
	for i, e := range s.Environments() {
		before := stores[i].reads.Load()
		a := e.LookupHash(ctx, Hash("alice"))
		read := stores[i].reads.Load() - before
		switch {
		case i == 0 && (read != 1 || !mapOf(a.Membership)["production.g2"]):
			t.Errorf("production after its change: %d reads, %v", read, mapOf(a.Membership))
		case i > 0 && (read != 0 || !a.Cached):
			t.Errorf("%s after production's change: %d reads, cached %v; want its cached answer", e.Name, read, a.Cached)
		}
	}
}

// Run polls at once, then every interval, in one read each time, until ctx ends.
func TestRunPollsEveryEnvironmentInOneRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, calls := threeEnvironments(t, Config{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
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

// New refuses what cannot be served.
func TestNewRefuses(t *testing.T) {
	store := newFakeStore()
	for _, tt := range []struct {
		name string
		envs []Environment
		cfg  Config
		want string
	}{
		{"none", nil, Config{}, "no environment"},
		{"a bad name", []Environment{{Name: "Prod", Store: store}}, Config{}, "lower-case"},
		{"a name twice", []Environment{{Name: "a", Store: store}, {Name: "a", Store: store}}, Config{}, "twice"},
		{"a prefix with its newline", []Environment{{Name: "a", Prefix: "ld-prod\n", Store: store}}, Config{}, "whitespace or control characters"},
		{"no store", []Environment{{Name: "a"}}, Config{}, "no store"},
		// Each environment's cache is a pair of go-caches of half its share: less than 2 each
		// would be rounded up, past the bound.
		{"a cache too small to share", []Environment{{Name: "a", Store: store}, {Name: "b", Store: store}}, Config{CacheSize: 3}, "each needs 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.envs, tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// A miss whose callers have all gone (hung up, or past their deadline) while it waited for
// a read slot is never read: a slow store owes no read to callers that left, and reads for
// those still waiting first.
func TestAbandonedMissIsNotRead(t *testing.T) {
	for _, tt := range []struct {
		name    string
		timeout time.Duration                   // of the callers that leave: none, or this deadline
		leave   func(cancel context.CancelFunc) // what makes them leave
	}{
		{"callers hung up", 0, func(cancel context.CancelFunc) { cancel() }},
		{"callers' deadline passed", time.Second, func(context.CancelFunc) { time.Sleep(time.Second) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, store, _ := newTestService(t, Config{NoCache: true, ReadsInFlight: 1, LookupTimeout: time.Minute, PollInterval: time.Hour})
				runCtx, stop := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- s.Run(runCtx) }()
				synctest.Wait()
				store.block = make(chan struct{})
				first := make(chan Answer)
				go func() { first <- s.LookupHash(context.Background(), Hash("first")) }() // takes the one read slot
				synctest.Wait()
				ctx, cancel := context.WithCancel(context.Background())
				if tt.timeout > 0 {
					ctx, cancel = context.WithTimeout(context.Background(), tt.timeout)
				}
				gone := make(chan Answer)
				for i := range 10 {
					go func() { gone <- s.LookupHash(ctx, Hash("gone-"+strconv.Itoa(i))) }()
				}
				synctest.Wait()
				tt.leave(cancel)
				for range 10 {
					if a := <-gone; a.Status != StoreError || a.Err == nil {
						t.Errorf("a lookup that left: %s, %v; want STORE_ERROR", a.Status, a.Err)
					}
				}
				store.mu.Lock()
				close(store.block)
				store.block = nil
				store.mu.Unlock()
				<-first
				synctest.Wait()
				if got := store.hashes.Load(); got != 1 {
					t.Errorf("%d contexts read, want 1: misses were read after their callers left", got)
				}
				cancel()
				stop()
				<-done
			})
		})
	}
}

// A lookup that joined a read whose first caller then left reads again itself: it is not
// failed for another caller's leaving.
func TestWaiterReadsAgainWhenTheFirstCallerLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, store, _ := newTestService(t, Config{NoCache: true, LookupTimeout: time.Hour})
		s.Poll(context.Background())
		store.put("alice", []string{"a.g1"}, nil)
		store.block = make(chan struct{})
		ctx, leave := context.WithCancel(context.Background())
		first, second := make(chan Answer), make(chan Answer)
		go func() { first <- s.LookupHash(ctx, Hash("alice")) }()
		synctest.Wait() // its read is inside the store
		go func() { second <- s.LookupHash(context.Background(), Hash("alice")) }()
		synctest.Wait() // waiting for the same read
		if got := store.reads.Load(); got != 1 {
			t.Fatalf("store reads = %d with the second lookup waiting, want 1: it shares the read", got)
		}
		leave()
		if r := <-first; !errors.Is(r.Err, context.Canceled) || r.Status != StoreError {
			t.Errorf("the caller that left: %s, %v", r.Status, r.Err)
		}
		synctest.Wait()
		store.mu.Lock()
		close(store.block)
		store.block = nil
		store.mu.Unlock()
		if r := <-second; r.Err != nil || r.Membership.Len() != 1 || r.Status != Healthy {
			t.Errorf("the caller that stayed: %v, %s, %v; want its answer", mapOf(r.Membership), r.Status, r.Err)
		}
		if got := store.reads.Load(); got != 2 {
			t.Errorf("store reads = %d, want 2: the read abandoned, then the second caller's own", got)
		}
	})
}

// Batches take at most half the read slots: while batches wait for the store, a single lookup
// still gets a slot of its own, and the bound on reads in flight holds.
func TestBatchesLeaveSlotsToSingleLookups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, store, _ := newTestService(t, Config{NoCache: true, ReadsInFlight: 4, LookupTimeout: time.Hour})
		s.Poll(ctx)
		store.block = make(chan struct{})
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() { s.LookupBatch(ctx, []string{Hash("batch-" + strconv.Itoa(i))}) })
		}
		synctest.Wait()
		if got := store.inFlight.Load(); got != 2 {
			t.Errorf("%d batch reads in the store, want 2: half the 4 slots", got)
		}
		wg.Go(func() { s.LookupHash(ctx, Hash("single")) })
		synctest.Wait()
		if got := store.inFlight.Load(); got != 3 {
			t.Errorf("%d reads in the store with a single lookup behind 4 waiting batches, want 3: the single one's too", got)
		}
		store.mu.Lock()
		close(store.block)
		store.block = nil
		store.mu.Unlock()
		wg.Wait()
		if got := store.maxFlight.Load(); got > 4 {
			t.Errorf("%d reads in the store at once, over the bound of 4", got)
		}
	})
}

// slowStore is a fakeStore whose every read takes d.
type slowStore struct {
	*fakeStore
	d time.Duration
}

func (s slowStore) Memberships(ctx context.Context, hashes []string) []Read {
	select {
	case <-time.After(s.d):
		return s.fakeStore.Memberships(ctx, hashes)
	case <-ctx.Done():
		reads := make([]Read, len(hashes))
		for i := range reads {
			reads[i].Err = ctx.Err()
		}
		return reads
	}
}

// TestOverloadAnswersTheStoresCapacity: misses arriving faster than a slow store answers them
// (50 callers each asking for a new context as soon as answered, a read taking 0.3 s of a 1 s
// lookup timeout, 4 read slots: 400 reads in 30 s at the most) still get most of the store's
// capacity answered, since a miss waits for a slot at most a quarter of the lookup timeout and
// a read begun has most of it left. Waiting on in a queue, each would get its slot when its
// time was nearly up, and about none would be answered.
func TestOverloadAnswersTheStoresCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFakeStore()
		store.setMeta(time.Now(), nil)
		s := newOne(slowStore{store, 300 * time.Millisecond}, Config{NoCache: true, ReadsInFlight: 4, LookupTimeout: time.Second})
		s.Poll(t.Context())
		end := time.Now().Add(30 * time.Second)
		var next, answered, refused atomic.Int64
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 20 * time.Millisecond) // arrivals spread, as real ones are
				for time.Now().Before(end) {
					switch r := s.LookupHash(t.Context(), Hash(strconv.FormatInt(next.Add(1), 10))); {
					case r.Err == nil:
						answered.Add(1)
					case strings.Contains(r.Err.Error(), "misses arrive faster"):
						refused.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if answered.Load() < 300 || refused.Load() == 0 {
			t.Errorf("%d answered, %d not read for want of time, of %d: want at least 300 answered (400 at the most)", answered.Load(), refused.Load(), next.Load())
		}
		t.Logf("%d answered, %d not read for want of time, of %d", answered.Load(), refused.Load(), next.Load())
	})
}

// lateStore is a fakeStore whose reads take d, whatever their context: as a store client that
// answers past its deadline.
type lateStore struct {
	*fakeStore
	d *time.Duration
}

func (s lateStore) Memberships(ctx context.Context, hashes []string) []Read {
	time.Sleep(*s.d)
	return s.fakeStore.Memberships(ctx, hashes)
}

// TestSlowReadDoesNotStopReads: after a read that took longer than the lookup timeout (a store
// that answered past its deadline), lookups still read the store: the rule that keeps reads
// from beginning without the time to finish never applies to so slow a read.
func TestSlowReadDoesNotStopReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFakeStore()
		store.setMeta(time.Now(), nil)
		store.put("alice", []string{"beta.g1"}, nil)
		d := 1200 * time.Millisecond
		s := newOne(lateStore{store, &d}, Config{NoCache: true, LookupTimeout: time.Second})
		s.Poll(t.Context())
		s.LookupHash(t.Context(), Hash("bob"))
		d = time.Millisecond
		if r := s.LookupHash(t.Context(), Hash("alice")); r.Err != nil || r.Membership.Len() != 1 {
			t.Errorf("after a slow read: %+v", r)
		}
	})
}

// TestSlowBatchDoesNotStopSingleReads: the time a batch's read took (many contexts) is not what
// a single lookup's read needs, so a lookup with less time left than a slow batch took still
// reads the store.
func TestSlowBatchDoesNotStopSingleReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFakeStore()
		store.setMeta(time.Now(), nil)
		store.put("alice", []string{"beta.g1"}, nil)
		d := time.Millisecond
		s := newOne(lateStore{store, &d}, Config{NoCache: true, LookupTimeout: time.Second})
		s.Poll(t.Context())
		s.LookupHash(t.Context(), Hash("bob"))
		d = 400 * time.Millisecond
		s.LookupBatch(t.Context(), []string{Hash("carol"), Hash("dave")})
		d = time.Millisecond
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		if r := s.LookupHash(ctx, Hash("alice")); r.Err != nil || r.Membership.Len() != 1 {
			t.Errorf("300 ms left after a batch read of 400 ms: %+v, want alice read", r)
		}
	})
}
