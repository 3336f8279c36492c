package segments

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// A burst of one-off contexts must never make a hot context miss: with the cache full of
// one-offs and every entry expired, the hot context is read once and then hits every time,
// however many one-offs keep coming between its lookups.
func TestOneOffContextsDoNotStarveHotOnes(t *testing.T) {
	ctx := context.Background()
	s, store, clk := newTestService(t, WithCache(100, 5*time.Second))
	s.Lookup(ctx, "hot")
	for i := range 200 {
		s.Lookup(ctx, "one-off-"+strconv.Itoa(i))
	}
	clk.Add(5 * time.Second) // everything cached has expired
	if r := s.Lookup(ctx, "hot"); r.Cached {
		t.Fatal("an expired entry was served")
	}
	readsBefore := store.reads.Load()
	misses := 0
	for i := range 1000 {
		s.Lookup(ctx, "later-one-off-"+strconv.Itoa(i))
		if r := s.Lookup(ctx, "hot"); !r.Cached {
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
	for _, h := range []string{"1", "2", "3"} { // fill the young generation: it becomes the old one
		set(h, m)
	}
	if got := c.len(); got != 3 {
		t.Fatalf("len = %d, want 3", got)
	}
	set("4", m)
	if _, ok := c.get("1"); !ok { // a hit in the old generation is copied into the young one
		t.Fatal("1 was dropped before its generation")
	}
	set("5", m) // the young generation (4, 1, 5) is full: rotate, dropping (1, 2, 3)
	for _, h := range []string{"2", "3"} {
		if _, ok := c.get(h); ok {
			t.Errorf("%s, never looked up again, survived two generations", h)
		}
	}
	for _, h := range []string{"1", "4", "5"} {
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
	c.set("6", m, gen, time.Hour) // read before the change, finished after it
	if _, ok := c.get("6"); ok {
		t.Error("an answer read in an older generation was served")
	}
}
