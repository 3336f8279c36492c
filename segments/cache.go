package segments

import (
	"sync"
	"sync/atomic"
	"time"

	gocache "github.com/patrickmn/go-cache"
)

// cache holds recent memberships by context hash, "no membership" included, with a bound on
// entries, a TTL, and a data generation.
//
// go-cache has no size limit of its own, so the bound is kept by rotation: new entries go
// into the young go-cache; an entry that would take a young go-cache past half the bound
// first makes it the old one, dropping the previous old one whole, and goes into a new young
// one. A hit in the old one is copied into the young one. So a context looked up at least once
// per half-bound of new entries stays cached until its TTL, whatever else passes through: a
// burst of one-off contexts only pushes out contexts that nobody asked for meanwhile. Every
// operation is O(1): no scan, no purge.
//
// Insertions, rotations and invalidations hold mu, so the check for room and the insertion
// are one step and neither go-cache ever holds more than half the bound, however many
// goroutines write at once: a writer that checked first and rotated after could let a burst
// of concurrent writers overfill the young one. Hits read the current pair of go-caches
// without mu.
//
// The data generation counts changes of the data (new cursors). Every entry carries the
// generation its read started in, and only entries of the current generation are served or
// stored, so invalidate drops everything at once, and a read that started before a change and
// finished after it is never served as current. Expiry is decided on the injected clock when an
// entry is read; go-cache's own expiration is not used, so an expired entry keeps its place
// until its go-cache is dropped or a new read of its context replaces it.
type cache struct {
	half int // entries per go-cache, at most
	now  func() time.Time

	generation atomic.Uint64
	mu         sync.Mutex // held to insert, rotate and invalidate
	maps       atomic.Pointer[cacheMaps]
}

type cacheMaps struct{ young, old *gocache.Cache }

type cacheEntry struct {
	m          Membership
	expires    int64 // unix nanoseconds on the injected clock
	generation uint64
}

// newCache returns nil, a disabled cache, when size is not positive. It holds at most size
// entries (at least two).
func newCache(size int, now func() time.Time) *cache {
	if size <= 0 {
		return nil
	}
	c := &cache{half: max(size/2, 1), now: now}
	c.maps.Store(newCacheMaps())
	return c
}

func newCacheMaps() *cacheMaps {
	return &cacheMaps{young: gocache.New(gocache.NoExpiration, 0), old: gocache.New(gocache.NoExpiration, 0)}
}

// get returns the membership cached for hash, if it is of the current generation and has not
// expired.
func (c *cache) get(hash string) (Membership, bool) {
	if c == nil {
		return Membership{}, false
	}
	maps := c.maps.Load()
	v, ok := maps.young.Get(hash)
	promote := false
	if !ok {
		if v, ok = maps.old.Get(hash); !ok {
			return Membership{}, false
		}
		promote = true
	}
	e := v.(cacheEntry)
	if e.generation != c.generation.Load() || c.now().UnixNano() >= e.expires {
		return Membership{}, false
	}
	if promote {
		c.put(hash, e)
	}
	return e.m, true
}

// currentGeneration is the generation a read starting now belongs to.
func (c *cache) currentGeneration() uint64 {
	if c == nil {
		return 0
	}
	return c.generation.Load()
}

// set caches m, read in generation gen, for ttl; an answer of an older generation is dropped.
func (c *cache) set(hash string, m Membership, gen uint64, ttl time.Duration) {
	if c == nil {
		return
	}
	c.put(hash, cacheEntry{m: m, expires: c.now().Add(ttl).UnixNano(), generation: gen})
}

// put stores e in the young go-cache, rotating first if e would take it past half the bound
// (an entry that replaces one of the same hash takes no new room).
func (c *cache) put(hash string, e cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.generation != c.generation.Load() { // invalidated since the read started
		return
	}
	maps := c.maps.Load()
	if maps.young.ItemCount() >= c.half {
		if _, replaces := maps.young.Get(hash); !replaces {
			maps = &cacheMaps{young: gocache.New(gocache.NoExpiration, 0), old: maps.young}
			c.maps.Store(maps)
		}
	}
	maps.young.Set(hash, e, gocache.DefaultExpiration)
}

// invalidate starts a new generation: nothing cached before is served again.
func (c *cache) invalidate() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation.Add(1)
	c.maps.Store(newCacheMaps()) // frees the memory now; the generation alone would do
}

// len counts entries, expired ones included: they take memory too. An entry promoted from the
// old go-cache counts twice until that one is dropped; the total is still within the bound,
// since each go-cache holds at most half of it.
func (c *cache) len() int {
	if c == nil {
		return 0
	}
	maps := c.maps.Load()
	return maps.young.ItemCount() + maps.old.ItemCount()
}
