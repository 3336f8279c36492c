package segments

import (
	"sync"
	"sync/atomic"
	"time"

	gocache "github.com/patrickmn/go-cache"
)

// cache holds recent memberships by context hash, "no membership" included, with a bound on
// entries and a TTL.
//
// go-cache has no size limit of its own, so the bound is kept by generations: new entries go
// into the young generation (one go-cache); when it holds half the bound, it becomes the old
// generation and the previous old one is dropped whole. A hit in the old generation is copied
// into the young one. So a context looked up at least once per half-bound of new entries stays
// cached until its TTL, whatever else passes through: a burst of one-off contexts only pushes
// out contexts that nobody asked for meanwhile. Every operation is O(1): no scan, no purge.
//
// Expiry is decided on the injected clock when an entry is read; go-cache's own expiration is
// not used. Expired entries take room until their generation is dropped, which the bound
// already counts.
type cache struct {
	half int // entries per generation
	ttl  time.Duration
	now  func() time.Time

	mu   sync.Mutex // serializes rotations
	gens atomic.Pointer[generations]
}

type generations struct{ young, old *gocache.Cache }

type cacheEntry struct {
	m       Membership
	expires int64 // unix nanoseconds on the injected clock
}

// newCache returns nil, a disabled cache, when size or ttl is not positive. It holds at most
// size entries (at least two).
func newCache(size int, ttl time.Duration, now func() time.Time) *cache {
	if size <= 0 || ttl <= 0 {
		return nil
	}
	c := &cache{half: max(size/2, 1), ttl: ttl, now: now}
	c.clear()
	return c
}

func newGeneration() *gocache.Cache { return gocache.New(gocache.NoExpiration, 0) }

// get returns the membership cached for hash, if it has not expired.
func (c *cache) get(hash string) (Membership, bool) {
	if c == nil {
		return Membership{}, false
	}
	g := c.gens.Load()
	v, ok := g.young.Get(hash)
	promote := false
	if !ok {
		if v, ok = g.old.Get(hash); !ok {
			return Membership{}, false
		}
		promote = true
	}
	e := v.(cacheEntry)
	if c.now().UnixNano() >= e.expires {
		return Membership{}, false
	}
	if promote {
		c.put(g, hash, e)
	}
	return e.m, true
}

// set caches m for hash for one TTL.
func (c *cache) set(hash string, m Membership) {
	if c == nil {
		return
	}
	c.put(c.gens.Load(), hash, cacheEntry{m: m, expires: c.now().Add(c.ttl).UnixNano()})
}

func (c *cache) put(g *generations, hash string, e cacheEntry) {
	g.young.Set(hash, e, gocache.DefaultExpiration)
	if g.young.ItemCount() < c.half {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gens.Load() == g { // not rotated meanwhile by another caller
		c.gens.Store(&generations{young: newGeneration(), old: g.young})
	}
}

// clear drops every entry at once.
func (c *cache) clear() {
	c.gens.Store(&generations{young: newGeneration(), old: newGeneration()})
}

// len counts entries, expired ones included: they take memory too. An entry promoted from the
// old generation counts twice until that generation is dropped.
func (c *cache) len() int {
	if c == nil {
		return 0
	}
	g := c.gens.Load()
	return g.young.ItemCount() + g.old.ItemCount()
}
