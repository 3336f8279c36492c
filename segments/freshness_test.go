package segments

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// included returns the refs a context is included in, as a test compares them.
func included(a Answer) []string {
	var refs []string
	for r, inc := range a.Membership.All() {
		if inc {
			refs = append(refs, r)
		}
	}
	return refs
}

// A new cursor drops every cached answer at once: the next lookup reads the new data, however
// long the TTL; the drop is counted and subscribers hear of it.
func TestNewCursorDropsCachedAnswers(t *testing.T) {
	ctx := context.Background()
	obs := &countingObserver{}
	s, store, _ := newTestService(t, Config{CacheSize: 1000, CacheTTL: time.Hour, Observer: func(*Environment) Observer { return obs }})
	store.patch("alice", []string{"a.g1"}, "v1")
	s.Poll(ctx)
	changes := s.Changes()
	for range 3 {
		s.LookupHash(ctx, Hash("alice"))
	}
	if r := s.LookupHash(ctx, Hash("alice")); !r.Cached {
		t.Fatal("not cached before the change")
	}
	store.patch("alice", []string{"b.g1"}, "v2")
	st := s.Poll(ctx)
	if st.Cursor != "v2" || st.DataChangedAt.IsZero() {
		t.Errorf("status after the change: %+v", st)
	}
	if got := s.CacheLen(); got != 0 {
		t.Errorf("CacheLen = %d right after the change, want 0", got)
	}
	if r := s.LookupHash(ctx, Hash("alice")); r.Cached || len(included(r)) != 1 || included(r)[0] != "b.g1" {
		t.Errorf("after the change: cached %v, %v; want the new data, read", r.Cached, mapOf(r.Membership))
	}
	if got := obs.dataChanges.Load(); got != 1 {
		t.Errorf("data changes observed = %d, want 1", got)
	}
	select {
	case <-changes:
		if ev, _ := s.Status(); ev.Cursor != "v2" {
			t.Errorf("event %+v, want the new cursor", ev)
		}
	default:
		t.Error("no event for the data change")
	}
}

// The synchronizer sets synchronized_on every 30 s while idle; that alone changes nothing.
func TestIdleHeartbeatInvalidatesNothing(t *testing.T) {
	ctx := context.Background()
	obs := &countingObserver{}
	s, store, clk := newTestService(t, Config{CacheSize: 1000, CacheTTL: time.Hour, Observer: func(*Environment) Observer { return obs }})
	store.patch("alice", []string{"a.g1"}, "v1")
	s.Poll(ctx)
	s.LookupHash(ctx, Hash("alice"))
	readsBefore := store.reads.Load()
	changes := s.Changes()
	for range 10 {
		clk.Add(30 * time.Second)
		store.setMeta(clk.Now(), nil)
		s.Poll(ctx)
		if r := s.LookupHash(ctx, Hash("alice")); !r.Cached {
			t.Fatal("an idle heartbeat dropped the cached answer")
		}
	}
	if got := store.reads.Load() - readsBefore; got != 0 {
		t.Errorf("store reads = %d over 10 heartbeats, want 0", got)
	}
	if got := obs.dataChanges.Load(); got != 0 {
		t.Errorf("data changes = %d, want 0", got)
	}
	select {
	case ev := <-changes:
		t.Errorf("an event for a heartbeat: %+v", ev)
	default:
	}
}

// A read that started before a change and finished after it is answered to whoever waited for
// it, but never cached as current.
func TestReadRacingAChangeIsNotCached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, store, _ := newTestService(t, Config{CacheSize: 1000, CacheTTL: time.Hour, LookupTimeout: time.Hour})
		store.patch("alice", []string{"old.g1"}, "v1")
		s.Poll(ctx)
		store.block = make(chan struct{})
		done := make(chan Answer)
		go func() { done <- s.LookupHash(ctx, Hash("alice")) }()
		synctest.Wait() // the read is inside the store, with the old data
		store.mu.Lock()
		store.cursor = "v2" // the patch commits ...
		store.mu.Unlock()
		s.Poll(ctx) // ... and the poll sees it while the read is still out
		store.mu.Lock()
		store.memberships[Hash("alice")] = NewMembership([]string{"new.g1"}, nil)
		close(store.block)
		store.block = nil
		store.mu.Unlock()
		if r := <-done; included(r)[0] != "old.g1" {
			t.Fatalf("the racing read answered %v", mapOf(r.Membership))
		}
		if r := s.LookupHash(ctx, Hash("alice")); r.Cached || included(r)[0] != "new.g1" {
			t.Errorf("after the racing read: cached %v, %v; want the new data, read again", r.Cached, mapOf(r.Membership))
		}
	})
}

// With a cursor, an answer is cached for an hour (a new cursor drops it sooner); without one, for the short TTL, as
// before cursors.
func TestCursorTTL(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		cursor   string
		cachedAt time.Duration // still cached this long after it was read
		goneAt   time.Duration
	}{
		{"v1", time.Hour - time.Second, time.Hour},
		{"", 5*time.Second - time.Millisecond, 5 * time.Second},
	} {
		s, store, clk := newTestService(t, Config{CacheSize: 1000, CacheTTL: 5 * time.Second})
		store.patch("alice", []string{"a.g1"}, tt.cursor)
		s.Poll(ctx)
		s.LookupHash(ctx, Hash("alice"))
		clk.Add(tt.cachedAt)
		if r := s.LookupHash(ctx, Hash("alice")); !r.Cached {
			t.Errorf("cursor %q: not cached %v after the read", tt.cursor, tt.cachedAt)
		}
		clk.Add(tt.goneAt - tt.cachedAt)
		if r := s.LookupHash(ctx, Hash("alice")); r.Cached {
			t.Errorf("cursor %q: still cached %v after the read", tt.cursor, tt.goneAt)
		}
	}
}

// The staleness bound: with Run polling, a change is answered at most one poll interval after
// the synchronizer commits it, whatever the cache TTL (plus one read, which takes no time here).
func TestChangeAnsweredWithinOnePollInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, store, _ := newTestService(t, Config{CacheSize: 1000, CacheTTL: time.Hour, PollInterval: time.Second, Now: time.Now})
		store.patch("alice", []string{"old.g1"}, "v1")
		go s.Run(ctx)
		synctest.Wait() // the first poll
		s.LookupHash(ctx, Hash("alice"))
		time.Sleep(300 * time.Millisecond) // the commit falls anywhere in a poll interval
		store.patch("alice", []string{"new.g1"}, "v2")
		committed := time.Now()
		for {
			r := s.LookupHash(ctx, Hash("alice"))
			if included(r)[0] == "new.g1" {
				if waited := time.Since(committed); waited > time.Second {
					t.Errorf("the change was answered %v after its commit, over the poll interval of 1s", waited)
				}
				break
			}
			if time.Since(committed) > 2*time.Second {
				t.Fatal("the change was not answered within two poll intervals")
			}
			time.Sleep(10 * time.Millisecond) // fake time: lookups at every 10ms after the commit
		}
		cancel()
		synctest.Wait()
	})
}

// A lookup that begins after a poll has seen a change never gets a read begun before it:
// with a slow store, the read of the old data is still out when the change is seen, and
// every lookup begun after that reads the new data.
func TestLookupAfterAChangeTakesNoEarlierRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, store, _ := newTestService(t, Config{CacheSize: 1000, CacheTTL: time.Hour, LookupTimeout: time.Hour})
		store.patch("alice", []string{"old.g1"}, "v1")
		s.Poll(ctx)
		store.block = make(chan struct{})
		before := make(chan Answer)
		go func() { before <- s.LookupHash(ctx, Hash("alice")) }()
		synctest.Wait() // its read is inside the store, with the old data
		store.patch("alice", []string{"new.g1"}, "v2")
		if st := s.Poll(ctx); st.Cursor != "v2" {
			t.Fatalf("the poll after the change: %+v", st)
		}
		after := make(chan Answer)
		for range 10 {
			go func() { after <- s.LookupHash(ctx, Hash("alice")) }()
		}
		synctest.Wait()
		store.mu.Lock()
		close(store.block)
		store.block = nil
		store.mu.Unlock()
		if r := <-before; r.Err != nil || included(r)[0] != "old.g1" {
			t.Errorf("the lookup begun before the change: %v, %v", mapOf(r.Membership), r.Err)
		}
		for i := range 10 {
			if r := <-after; r.Err != nil || included(r)[0] != "new.g1" || r.Status != Healthy {
				t.Errorf("lookup %d begun after the change was seen: %v, %s, %v; want the new data", i, mapOf(r.Membership), r.Status, r.Err)
			}
		}
	})
}
