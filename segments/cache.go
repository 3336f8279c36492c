package segments

import "time"

// cache holds an environment's recent memberships by hash within a bound: a pair of maps of
// one data generation (see the package documentation). Its Environment's lock guards it; the
// zero cache is off.
type cache struct {
	half       int // entries per map, at most; 0: the cache is off
	young, old map[string]cacheEntry
	generation uint64
}

type cacheEntry struct {
	m       Membership
	expires int64 // unix nanoseconds on the injected clock
}

// newCache returns a cache of at most size entries (at least two).
func newCache(size int) cache {
	return cache{half: max(size/2, 1), young: make(map[string]cacheEntry), old: make(map[string]cacheEntry)}
}

// get returns the status, the cache generation and, unless absent or expired, the membership
// cached for hash; a hit in the old map is copied into the young one.
func (e *Environment) get(hash string) (st *StoreStatus, gen uint64, m Membership, hit bool) {
	e.mu.RLock()
	st, gen = e.status, e.cache.generation
	en, young := e.cache.young[hash]
	hit = young
	if !young {
		en, hit = e.cache.old[hash]
	}
	e.mu.RUnlock()
	if !hit || e.svc.now().UnixNano() >= en.expires {
		return st, gen, Membership{}, false
	}
	if !young {
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
	if _, replaces := c.young[hash]; !replaces && len(c.young) >= c.half {
		c.young, c.old = make(map[string]cacheEntry), c.young
	}
	c.young[hash] = en
}

// invalidate starts a new generation, with an empty pair: nothing cached before is served.
// The caller holds the Environment's lock.
func (c *cache) invalidate() {
	c.generation++
	if c.half > 0 {
		c.young, c.old = make(map[string]cacheEntry), make(map[string]cacheEntry)
	}
}

// ttlFor is how long an answer read under st is cached.
func (s *Service) ttlFor(st *StoreStatus) time.Duration {
	if st.Cursor != "" {
		return s.cursorTTL
	}
	return s.cacheTTL
}
