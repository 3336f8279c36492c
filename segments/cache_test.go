package segments

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A burst of one-off contexts must never make a hot context miss: with the cache full of
// one-offs and every entry expired, the hot context is read once and then hits every time,
// however many one-offs keep coming between its lookups.
func TestOneOffContextsDoNotStarveHotOnes(t *testing.T) {
	ctx := context.Background()
	s, store, clk := newTestService(t, Config{CacheSize: 100, CacheTTL: 5 * time.Second})
	s.LookupHash(ctx, Hash("hot"))
	for i := range 200 {
		s.LookupHash(ctx, Hash("one-off-"+strconv.Itoa(i)))
	}
	clk.Add(5 * time.Second) // everything cached has expired
	if r := s.LookupHash(ctx, Hash("hot")); r.Cached {
		t.Fatal("an expired entry was served")
	}
	readsBefore := store.reads.Load()
	misses := 0
	for i := range 1000 {
		s.LookupHash(ctx, Hash("later-one-off-"+strconv.Itoa(i)))
		if r := s.LookupHash(ctx, Hash("hot")); !r.Cached {
			misses++
		}
	}
	if misses > 0 {
		t.Errorf("the hot context missed %d times of 1000 between one-off lookups, want 0", misses)
	}
	if got := store.reads.Load() - readsBefore; got != 1000 {
		t.Errorf("store reads = %d, want 1000 (one per one-off, none for the hot context)", got)
	}
}

// cacheOf is an environment whose cache holds size entries, on a clock of its own, with
// what tests do to its cache.
func cacheOf(size int) (e *Environment, clk *clock, set func(hash string), hit func(hash string) bool) {
	clk = newClock()
	e = newOne(newFakeStore(), Config{CacheSize: size, CacheTTL: time.Hour, Now: clk.Now}).Environment
	m := NewMembership([]string{"a.g1"}, nil)
	set = func(h string) {
		_, gen := e.snapshot()
		e.put(h, cacheEntry{m: m, expires: clk.Now().Add(time.Hour).UnixNano()}, gen)
	}
	hit = func(h string) bool { _, _, ok := e.get(h); return ok }
	return e, clk, set, hit
}

func TestCacheGenerations(t *testing.T) {
	c, clk, set, hit := cacheOf(6)
	for _, h := range []string{"1", "2", "3"} { // fill the young map
		set(h)
	}
	if got := c.CacheLen(); got != 3 {
		t.Fatalf("len = %d, want 3", got)
	}
	// No room in the young map for 4: it becomes the old one (1, 2, 3).
	set("4")
	if !hit("1") { // a hit in the old map is copied into the young one
		t.Fatal("1 was dropped before its generation")
	}
	set("5") // the young map (4, 1, 5) is full
	set("6") // rotate again, dropping (1, 2, 3)
	for _, h := range []string{"2", "3"} {
		if hit(h) {
			t.Errorf("%s, never looked up again, survived two rotations", h)
		}
	}
	for _, h := range []string{"1", "4", "5", "6"} {
		if !hit(h) {
			t.Errorf("%s was dropped", h)
		}
	}
	if got := c.CacheLen(); got > 6 {
		t.Errorf("len = %d, over the bound of 6", got)
	}
	clk.Add(time.Hour)
	if hit("1") {
		t.Error("an entry was served at its TTL")
	}
	_, gen := c.snapshot()
	c.record(Metadata{}, nil)
	c.record(Metadata{Cursor: "v2"}, nil) // a new cursor: a new generation
	if got := c.CacheLen(); got != 0 {
		t.Errorf("len = %d after invalidate", got)
	}
	c.put("7", cacheEntry{expires: clk.Now().Add(time.Hour).UnixNano()}, gen) // read before the change, finished after it
	if hit("7") {
		t.Error("an answer read in an older generation was served")
	}
	if got := c.CacheLen(); got != 0 {
		t.Errorf("len = %d after an answer of an older generation, want 0: it takes no room", got)
	}
}

// The bound holds however many goroutines write at once: neither map ever holds more than
// half of it, so the whole never holds more than all of it, at any moment and at the end.
func TestCacheBoundUnderConcurrentWriters(t *testing.T) {
	tests := []struct {
		name                     string
		size, writers, perWriter int
	}{
		{"small cache, many writers", 8, 32, 2000},
		{"odd size", 11, 16, 2000},
		{"larger cache", 256, 32, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, set, hit := cacheOf(tt.size)
			var maxLen, maxHalf atomic.Int64
			record := func(v *atomic.Int64, n int) {
				for {
					old := v.Load()
					if int64(n) <= old || v.CompareAndSwap(old, int64(n)) {
						return
					}
				}
			}
			observe := func() {
				record(&maxLen, c.CacheLen())
				c.mu.RLock()
				record(&maxHalf, max(c.young.ItemCount(), c.old.ItemCount()))
				c.mu.RUnlock()
			}
			var wg sync.WaitGroup
			for w := range tt.writers {
				wg.Go(func() {
					for i := range tt.perWriter {
						set(strconv.Itoa(w) + "/" + strconv.Itoa(i))
						if i%3 == 0 { // hits, some in the old map: promotions insert too
							hit(strconv.Itoa(w) + "/" + strconv.Itoa(i/2))
						}
						observe()
					}
				})
			}
			wg.Wait()
			observe()
			if got, bound := maxLen.Load(), int64(tt.size); got > bound {
				t.Errorf("len reached %d, over the bound of %d", got, bound)
			}
			if got, half := maxHalf.Load(), int64(tt.size/2); got > half {
				t.Errorf("a map held %d entries, over half the bound (%d)", got, half)
			}
			if got := c.CacheLen(); got > tt.size {
				t.Errorf("len = %d at the end, over the bound of %d", got, tt.size)
			}
		})
	}
}
