package segments

import (
	"time"

	gocache "github.com/patrickmn/go-cache"
)

// cache holds an environment's recent memberships by hash within a bound: a pair of go-caches
// of one data generation (see the package documentation). Its Environment's lock guards which
// go-caches are the pair; the zero cache is off.
type cache struct {
	half       int // entries per go-cache, at most; 0: the cache is off
	young, old *gocache.Cache
	generation uint64
}

type cacheEntry struct {
	m       Membership
	expires int64 // unix nanoseconds on the injected clock
}

// newCache returns a cache of at most size entries (at least two).
func newCache(size int) cache {
	return cache{half: max(size/2, 1), young: newGoCache(), old: newGoCache()}
}

// newGoCache returns a go-cache whose own expiry is off: it reads time.Now, which tests cannot
// move, so entries carry their expiry on the injected clock instead.
func newGoCache() *gocache.Cache { return gocache.New(gocache.NoExpiration, 0) }

// get returns the status, the cache generation and, unless absent or expired, the membership
// cached for hash; a hit in the old go-cache is copied into the young one.
func (e *Environment) get(hash string) (st *StoreStatus, gen uint64, m Membership, hit bool) {
	e.mu.RLock()
	st, gen = e.status, e.cache.generation
	var v any
	young, old := e.cache.young, e.cache.old
	e.mu.RUnlock()
	if young == nil { // the cache is off
		return st, gen, Membership{}, false
	}
	v, hit = young.Get(hash)
	inYoung := hit
	if !hit {
		v, hit = old.Get(hash)
	}
	en, _ := v.(cacheEntry)
	if !hit || e.svc.now().UnixNano() >= en.expires {
		return st, gen, Membership{}, false
	}
	if !inYoung {
		e.put(hash, en, gen)
	}
	return st, gen, en.m, true
}

// put caches en for hash unless its generation gen is over, first making the young map the
// old one (dropping the old one whole) if en would take it past half the bound.
func (e *Environment) put(hash string, en cacheEntry, gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := &e.cache
	if c.half == 0 || gen != c.generation {
		return
	}
	if c.young.ItemCount() >= c.half {
		if _, replaces := c.young.Get(hash); !replaces {
			c.young, c.old = newGoCache(), c.young
		}
	}
	c.young.Set(hash, en, gocache.NoExpiration)
}

// invalidate starts a new generation, with an empty pair: nothing cached before is served.
// The caller holds the Environment's lock.
func (c *cache) invalidate() {
	c.generation++
	if c.half > 0 {
		c.young, c.old = newGoCache(), newGoCache()
	}
}

// ttlFor is how long an answer read under st is cached.
func (s *Service) ttlFor(st *StoreStatus) time.Duration {
	if st.Cursor != "" {
		return s.cursorTTL
	}
	return s.cacheTTL
}
