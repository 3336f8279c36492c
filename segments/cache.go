package segments

import (
	"sync"
	"sync/atomic"
	"time"

	gocache "github.com/patrickmn/go-cache"
)

// cache holds an environment's recent memberships by hash within a bound, in a pair of
// go-caches of one data generation (see the package documentation). A nil cache is off.
type cache struct {
	half int // entries per go-cache, at most
	now  func() time.Time
	mu   sync.Mutex // held to insert, rotate and invalidate; hits take no lock
	maps atomic.Pointer[cacheMaps]
}

type cacheMaps struct {
	young, old *gocache.Cache
	generation uint64
}

type cacheEntry struct {
	m       Membership
	expires int64 // unix nanoseconds on the injected clock
}

// newCache returns a cache of at most size entries (at least two).
func newCache(size int, now func() time.Time) *cache {
	c := &cache{half: max(size/2, 1), now: now}
	c.maps.Store(&cacheMaps{young: newGoCache(), old: newGoCache()})
	return c
}

func newGoCache() *gocache.Cache { return gocache.New(gocache.NoExpiration, 0) }

// get returns the membership cached for hash, unless expired; a hit in the old go-cache is
// copied into the young one.
func (c *cache) get(hash string) (Membership, bool) {
	if c == nil {
		return Membership{}, false
	}
	maps := c.maps.Load()
	v, ok := maps.young.Get(hash)
	promote := !ok
	if promote {
		if v, ok = maps.old.Get(hash); !ok {
			return Membership{}, false
		}
	}
	e := v.(cacheEntry)
	if c.now().UnixNano() >= e.expires {
		return Membership{}, false
	}
	if promote {
		c.put(hash, e, maps.generation)
	}
	return e.m, true
}

// currentGeneration is the generation a read starting now belongs to.
func (c *cache) currentGeneration() uint64 {
	if c == nil {
		return 0
	}
	return c.maps.Load().generation
}

// set caches m, read in generation gen, for ttl.
func (c *cache) set(hash string, m Membership, gen uint64, ttl time.Duration) {
	if c != nil {
		c.put(hash, cacheEntry{m: m, expires: c.now().Add(ttl).UnixNano()}, gen)
	}
}

// put stores e unless its generation is over, first rotating if e would take the young
// go-cache past half the bound (replacing an entry takes no new room).
func (c *cache) put(hash string, e cacheEntry, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maps := c.maps.Load()
	if gen != maps.generation {
		return
	}
	if maps.young.ItemCount() >= c.half {
		if _, replaces := maps.young.Get(hash); !replaces {
			maps = &cacheMaps{young: newGoCache(), old: maps.young, generation: gen}
			c.maps.Store(maps)
		}
	}
	maps.young.Set(hash, e, gocache.DefaultExpiration)
}

// invalidate starts a new generation, with an empty pair: nothing cached before is served.
func (c *cache) invalidate() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maps.Store(&cacheMaps{young: newGoCache(), old: newGoCache(), generation: c.maps.Load().generation + 1})
}

// len counts entries, expired ones included; a promoted one counts twice, within the bound.
func (c *cache) len() int {
	if c == nil {
		return 0
	}
	maps := c.maps.Load()
	return maps.young.ItemCount() + maps.old.ItemCount()
}
