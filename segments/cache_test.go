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
	s, store, clk := newTestService(t, WithCache(100, 5*time.Second))
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

func TestCacheGenerations(t *testing.T) {
	now := time.Unix(0, 0)
	c := newCache(6, func() time.Time { return now })
	set := func(h string, m Membership) { c.set(h, m, c.currentGeneration(), time.Hour) }
	m := NewMembership([]string{"a.g1"}, nil)
	for _, h := range []string{"1", "2", "3"} { // fill the young generation
		set(h, m)
	}
	if got := c.len(); got != 3 {
		t.Fatalf("len = %d, want 3", got)
	}
	// No room in the young generation for 4: it becomes the old one (1, 2, 3).
	set("4", m)
	if _, ok := c.get("1"); !ok { // a hit in the old generation is copied into the young one
		t.Fatal("1 was dropped before its generation")
	}
	set("5", m) // the young generation (4, 1, 5) is full
	set("6", m) // rotate again, dropping (1, 2, 3)
	for _, h := range []string{"2", "3"} {
		if _, ok := c.get(h); ok {
			t.Errorf("%s, never looked up again, survived two generations", h)
		}
	}
	for _, h := range []string{"1", "4", "5", "6"} {
		if _, ok := c.get(h); !ok {
			t.Errorf("%s was dropped", h)
		}
	}
	if got := c.len(); got > 6 {
		t.Errorf("len = %d, over the bound of 6", got)
	}
	now = now.Add(time.Hour)
	if _, ok := c.get("1"); ok {
		t.Error("an entry was served at its TTL")
	}
	gen := c.currentGeneration()
	c.invalidate()
	if got := c.len(); got != 0 {
		t.Errorf("len = %d after invalidate", got)
	}
	c.set("7", m, gen, time.Hour) // read before the change, finished after it
	if _, ok := c.get("7"); ok {
		t.Error("an answer read in an older generation was served")
	}
	if got := c.len(); got != 0 {
		t.Errorf("len = %d after an answer of an older generation, want 0: it takes no room", got)
	}
}

// The bound holds however many goroutines write at once: neither go-cache ever holds more than
// half of it, so the whole never holds more than all of it, at any moment and at the end.
// Checking for room after inserting (and rotating under a lock only then) let concurrent
// writers overfill the young go-cache, which then became an old one over half the bound.
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
			now := time.Unix(0, 0)
			c := newCache(tt.size, func() time.Time { return now })
			m := NewMembership([]string{"a.g1"}, nil)
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
				record(&maxLen, c.len())
				maps := c.maps.Load()
				record(&maxHalf, max(maps.young.ItemCount(), maps.old.ItemCount()))
			}
			var wg sync.WaitGroup
			for w := range tt.writers {
				wg.Go(func() {
					for i := range tt.perWriter {
						key := strconv.Itoa(w) + "/" + strconv.Itoa(i)
						c.set(key, m, c.currentGeneration(), time.Hour)
						if i%3 == 0 { // hits, some in the old go-cache: promotions insert too
							c.get(strconv.Itoa(w) + "/" + strconv.Itoa(i/2))
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
				t.Errorf("a go-cache held %d entries, over half the bound (%d)", got, half)
			}
			if got := c.len(); got > tt.size {
				t.Errorf("len = %d at the end, over the bound of %d", got, tt.size)
			}
		})
	}
}
