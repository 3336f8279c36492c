package segments

import (
	"context"
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

// Misses of different contexts that arrive while every reader of Run's is busy are read
// together, by the next free reader, in one store call.
func TestMissesForDifferentContextsShareOneRead(t *testing.T) {
	tests := []struct {
		name          string
		readers       int
		wantMostReads int64
	}{
		{"one reader", 1, 2},  // the blocked read, then the other 50 at once
		{"two readers", 2, 4}, // two blocked reads, then the other 49 in one or two
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, store, _ := newTestService(t, WithCache(0, 0), WithReadsInFlight(tt.readers), WithLookupTimeout(0), WithPollInterval(time.Hour))
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- s.Run(ctx) }()
				synctest.Wait()
				for i := range 51 {
					store.put("user-"+strconv.Itoa(i), []string{"seg-" + strconv.Itoa(i) + ".g1"}, nil)
				}
				store.block = make(chan struct{})
				var wg sync.WaitGroup
				answers := make([]Answer, 51)
				lookup := func(i int) {
					wg.Go(func() { answers[i] = s.LookupHash(context.Background(), Hash("user-"+strconv.Itoa(i))) })
				}
				for i := range tt.readers { // occupy every reader first, then queue the rest
					lookup(i)
					synctest.Wait()
				}
				for i := tt.readers; i < 51; i++ {
					lookup(i)
				}
				synctest.Wait()
				store.mu.Lock()
				close(store.block)
				store.block = nil
				store.mu.Unlock()
				wg.Wait()
				if got := store.reads.Load(); got < int64(tt.readers)+1 || got > tt.wantMostReads {
					t.Errorf("store reads = %d, want %d to %d", got, tt.readers+1, tt.wantMostReads)
				}
				if got := store.hashes.Load(); got != 51 {
					t.Errorf("hashes read = %d, want 51 (each once)", got)
				}
				for i, r := range answers {
					if _, listed := mapOf(r.Membership)["seg-"+strconv.Itoa(i)+".g1"]; !listed || r.Err != nil {
						t.Errorf("user-%d got %v, %v", i, mapOf(r.Membership), r.Err)
					}
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// Lookups are read before Run, while it runs, while it stops and after: every miss is
// answered and no goroutine is left behind. Run runs once.
func TestLookupsAroundRun(t *testing.T) {
	for round := range 200 {
		s, _, _ := newTestService(t, WithCache(0, 0), WithPollInterval(time.Hour))
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
		if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "has run") {
			t.Fatalf("a second Run: %v, want an error", err)
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

func threeEnvironments(t *testing.T, opts ...Option) (*Service, []*fakeStore, *atomic.Int64) {
	t.Helper()
	c := newClock()
	envs, stores := threeStores(c)
	var calls atomic.Int64
	s, err := New(envs, append([]Option{WithClock(c.Now), WithMetadataRead(batchOf(stores, &calls))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, stores, &calls
}

// A poll reads every environment's metadata in one read, and each keeps its own status.
func TestPollReadsEveryEnvironmentOnce(t *testing.T) {
	obs := &countingObserver{}
	s, stores, calls := threeEnvironments(t, WithObserver(func(*Environment) Observer { return obs }))
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
	s, stores, _ := threeEnvironments(t)
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
		s, _, calls := threeEnvironments(t)
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
		want string
	}{
		{"none", nil, "no environment"},
		{"a bad name", []Environment{{Name: "Prod", Store: store}}, "lower-case"},
		{"a name twice", []Environment{{Name: "a", Store: store}, {Name: "a", Store: store}}, "twice"},
		{"no store", []Environment{{Name: "a"}}, "no store"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.envs); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// A miss that no reader takes within the lookup timeout is given up, not left queued until the
// store answers again: a slow store holds no goroutine, and owes no read, per context asked for.
func TestQueuedMissGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFakeStore()
		store.setMeta(time.Now(), nil)
		block := make(chan struct{})
		store.block = block
		s := newOne(store, WithReadsInFlight(1), WithLookupTimeout(time.Second))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()
		go s.LookupHash(context.Background(), Hash("first")) // the one reader waits in the store
		synctest.Wait()
		for i := range 10 {
			if a := s.LookupHash(context.Background(), Hash("queued-"+strconv.Itoa(i))); a.Status != StoreError {
				t.Errorf("lookup %d behind a stuck reader: %v, want %v", i, a.Status, StoreError)
			}
		}
		synctest.Wait()
		close(block)
		synctest.Wait()
		if got := store.hashes.Load(); got != 1 {
			t.Errorf("%d contexts read once the store answered, want 1: the given-up misses were still queued", got)
		}
		cancel()
		<-done
	})
}
