package segments

import (
	"time"

	gocache "github.com/patrickmn/go-cache"
)

// cache holds recent memberships, by context key for key lookups and by hash for hash
// lookups (a key lookup that hits never hashes).
//
// go-cache has no size limit of its own. This one enforces a bound on admission: while the two
// maps together hold max entries, new entries are not stored (the lookup is still answered
// from the store) until purge removes expired ones. Service.Run purges every TTL, so an entry
// lives at most about two TTLs and a full cache frees up within one TTL. Refusing admission
// instead of evicting keeps every operation O(1) and never lets a burst of one-off keys push
// out the hot ones.
//
// Expiry decisions use the injected clock; go-cache's own expiration (on the real clock, with
// the same TTL) is only used to purge.
type cache struct {
	keys   *gocache.Cache
	hashes *gocache.Cache
	max    int
	ttl    time.Duration
	now    func() time.Time
}

// cacheEntry is one cached answer. Entries cached by key keep the key's hash, which every
// response carries, so that a hit by key never hashes.
type cacheEntry struct {
	m       Membership
	hash    string
	expires int64 // unix nanoseconds on the injected clock
}

// newCache returns nil, a disabled cache, when size or ttl is not positive.
func newCache(size int, ttl time.Duration, now func() time.Time) *cache {
	if size <= 0 || ttl <= 0 {
		return nil
	}
	return &cache{
		keys:   gocache.New(ttl, 0),
		hashes: gocache.New(ttl, 0),
		max:    size,
		ttl:    ttl,
		now:    now,
	}
}

func (c *cache) store(byHash bool) *gocache.Cache {
	if byHash {
		return c.hashes
	}
	return c.keys
}

// get returns the membership cached for k and the context's hash.
func (c *cache) get(byHash bool, k string) (m Membership, hash string, ok bool) {
	if c == nil {
		return Membership{}, "", false
	}
	v, ok := c.store(byHash).Get(k)
	if !ok {
		return Membership{}, "", false
	}
	e := v.(*cacheEntry)
	if c.now().UnixNano() >= e.expires {
		return Membership{}, "", false
	}
	if byHash {
		return e.m, k, true
	}
	return e.m, e.hash, true
}

// set caches m for k; hash is the context's hash, kept only for entries by key.
func (c *cache) set(byHash bool, k, hash string, m Membership) {
	if c == nil {
		return
	}
	if c.len() >= c.max {
		return
	}
	e := &cacheEntry{m: m, expires: c.now().Add(c.ttl).UnixNano()}
	if !byHash {
		e.hash = hash
	}
	c.store(byHash).Set(k, e, gocache.DefaultExpiration)
}

// len counts entries, including expired ones not yet purged: they take memory too.
func (c *cache) len() int {
	if c == nil {
		return 0
	}
	return c.keys.ItemCount() + c.hashes.ItemCount()
}

// purge drops entries expired on the real clock.
func (c *cache) purge() {
	if c == nil {
		return
	}
	c.keys.DeleteExpired()
	c.hashes.DeleteExpired()
}
