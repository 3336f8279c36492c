package segments

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	gocache "github.com/patrickmn/go-cache"
	"golang.org/x/sync/singleflight"
)

// Environment is one environment served: its name (in routes, scopes and metrics), the prefix of
// its data and its store, read-only once New has made it part of a Service.
type Environment struct {
	Name   string
	Prefix string // the key prefix of its data as stored, "" for none (DynamoDB's default)
	Store  Store

	svc    *Service
	log    *slog.Logger
	obs    Observer
	*state // behind a pointer, so that an Environment is a value callers can copy and compare
}

type state struct {
	mu         sync.RWMutex   // guards the fields up to flight
	status     *StoreStatus   // nil before the first poll
	young, old *gocache.Cache // the cache; entries expire on the Service's clock
	half       int            // the most entries either go-cache holds; 0: the cache is off
	gen        uint64         // the cache generation: a new cursor begins the next
	inventory  Inventory
	lastRead   time.Duration // how long the last successful read of one context took (see readStore)
	readFailed bool          // the last store read failed for the store's sake: with a failed poll, misses fail at once

	flight     singleflight.Group // one read of a hash a generation, shared by its lookups
	slots      chan struct{}      // the semaphore of store reads
	batchSlots chan struct{}      // batches' share of slots: at most half, so that single lookups always have some
}

func newGoCache() *gocache.Cache { return gocache.New(gocache.NoExpiration, 0) }

type cacheEntry struct {
	m       Membership
	expires int64 // unix nanoseconds
}

// Answer is what a lookup answers for one context.
type Answer struct {
	ContextHash string       // the hash the store was (or would have been) read with
	Membership  Membership   // empty when Err is set
	Status      LookupStatus // StoreError when Err is set, else the store's
	Err         error        // why the membership could not be read
	Cached      bool         // the answer came from the cache
}

// LookupHash answers for the context of hash (Hash of its key, or a hash that ValidateHash accepts).
func (e *Environment) LookupHash(ctx context.Context, hash string) Answer {
	if st, m, hit := e.get(hash); hit && st != nil {
		return e.answer(hash, m, st.LookupStatus(), true)
	}
	return e.lookup(ctx, []string{hash}, false)[0]
}

// LookupBatch answers for many contexts, in order, reading the misses in one store call.
func (e *Environment) LookupBatch(ctx context.Context, hashes []string) []Answer {
	return e.lookup(ctx, hashes, true)
}

func (e *Environment) lookup(ctx context.Context, hashes []string, batch bool) []Answer {
	ctx, cancel := e.svc.withTimeout(ctx)
	defer cancel()
	st, gen := e.firstStatus(ctx)
	answers := make([]Answer, len(hashes))
	missing := map[string]int{} // hash -> its index in toRead
	var toRead []string
	for i, h := range hashes {
		if _, m, hit := e.get(h); hit {
			answers[i] = e.answer(h, m, st.LookupStatus(), true)
		} else if _, seen := missing[h]; !seen {
			missing[h] = len(toRead)
			toRead = append(toRead, h)
		}
	}
	e.mu.RLock()
	down := !st.Available && e.readFailed // the poll and the last read both failed: no read until a poll answers
	e.mu.RUnlock()
	reads := slices.Repeat([]Read{{Err: ErrStoreUnreachable}}, len(toRead))
	switch {
	case len(toRead) == 0 || down:
	case batch:
		reads = e.readStore(ctx, toRead, e.batchSlots, e.slots)
	default:
		reads[0] = e.readShared(ctx, toRead[0], gen)
	}
	ttl := e.svc.cfg.CacheTTL
	if st.Cursor != "" {
		ttl = time.Hour // a new cursor drops the answer sooner
	}
	for i, h := range hashes {
		if answers[i].Cached {
			continue
		}
		r := reads[missing[h]]
		if r.Err != nil {
			answers[i] = Answer{ContextHash: h, Status: StoreError, Err: r.Err}
			if !errors.Is(r.Err, context.Canceled) { // its caller left: nobody was answered
				e.obs.Lookup(StoreError, false)
			}
			continue
		}
		e.put(h, cacheEntry{r.Membership, e.svc.cfg.Now().Add(ttl).UnixNano()}, gen)
		answers[i] = e.answer(h, r.Membership, st.LookupStatus(), false)
	}
	return answers
}

func (e *Environment) answer(hash string, m Membership, status LookupStatus, cached bool) Answer {
	e.obs.Lookup(status, cached)
	return Answer{ContextHash: hash, Membership: m, Status: status, Cached: cached}
}

// readShared reads hash once for the lookups of it begun in generation gen, on the first caller's
// goroutine and in its context: if that caller leaves early, those still waiting read again.
func (e *Environment) readShared(ctx context.Context, hash string, gen uint64) Read {
	key := strconv.FormatUint(gen, 10) + " " + hash
	for {
		v, err, _ := e.flight.Do(key, func() (any, error) {
			r := e.readStore(ctx, []string{hash}, e.slots)[0]
			if r.Err != nil && context.Cause(ctx) != e.svc.timeout {
				return r, ctx.Err() // not nil if its caller left before the read was done
			}
			return r, nil
		})
		switch r := v.(Read); {
		case err == nil && (r.Err == nil || ctx.Err() == nil):
			return r
		case ctx.Err() != nil: // this caller's time is up, or it left: say which
			return Read{Err: fmt.Errorf("read membership: %w", context.Cause(ctx))}
		}
	}
}

// readStore reads memberships holding a slot of each semaphore, taken within ctx, and returns one
// Read per hash, always: a store that panics or miscounts fails the read. A read is not begun with
// less time left than the last successful read of one context took (see the package
// documentation), unless that took half the lookup timeout or more: then every lookup reads, so
// the rule never keeps a store unread.
func (e *Environment) readStore(ctx context.Context, hashes []string, sems ...chan struct{}) []Read {
	for _, sem := range sems {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		case <-ctx.Done():
			return slices.Repeat([]Read{{Err: fmt.Errorf("read membership: %w", context.Cause(ctx))}}, len(hashes))
		}
	}
	e.mu.RLock()
	last := e.lastRead
	e.mu.RUnlock()
	if deadline, ok := ctx.Deadline(); ok && last < e.svc.cfg.LookupTimeout/2 && time.Until(deadline) < last {
		err := fmt.Errorf("read membership: %v left for a store read, the last took %v: misses arrive faster than the store answers", time.Until(deadline).Round(time.Millisecond), last.Round(time.Millisecond))
		return slices.Repeat([]Read{{Err: err}}, len(hashes))
	}
	start := time.Now()
	var reads []Read
	err := safely(func() { reads = e.Store.Memberships(ctx, hashes) })
	if err == nil && len(reads) != len(hashes) {
		err = fmt.Errorf("store returned %d reads for %d contexts", len(reads), len(hashes))
	}
	if err != nil {
		reads = slices.Repeat([]Read{{Err: err}}, len(hashes))
	}
	var first error
	for i, r := range reads {
		for ref := range r.Membership.All() {
			if !utf8.ValidString(ref) {
				r.Err = fmt.Errorf("%w: a segment ref is not valid UTF-8", ErrInvalidData)
				break
			}
		}
		if r.Err != nil {
			r.Err = fmt.Errorf("read membership: %w", r.Err)
			first = cmp.Or(first, r.Err)
		}
		reads[i] = r
	}
	e.obs.StoreRead(OpMemberships, time.Since(start), first)
	e.mu.Lock()
	// Not a context's data, nor its caller leaving: the store's fault.
	e.readFailed = first != nil && !errors.Is(first, ErrInvalidData) && !errors.Is(context.Cause(ctx), context.Canceled)
	if first == nil && len(hashes) == 1 { // a batch's time is not a single read's
		e.lastRead = time.Since(start)
	}
	e.mu.Unlock()
	return reads
}

// safely runs a store call, a panic in it an error: the read fails, and the process goes on.
func safely(call func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("store panicked: %v", v)
		}
	}()
	call()
	return nil
}

// get returns the last status and hash's cached answer, if any; a hit in the old go-cache is
// copied into the young one, so that a context looked up often stays cached.
func (e *Environment) get(hash string) (*StoreStatus, Membership, bool) {
	e.mu.RLock()
	st, gen, young, old := e.status, e.gen, e.young, e.old
	e.mu.RUnlock()
	v, inYoung := young.Get(hash)
	if !inYoung {
		v, _ = old.Get(hash)
	}
	en, ok := v.(cacheEntry)
	if !ok || e.svc.cfg.Now().UnixNano() >= en.expires {
		return st, Membership{}, false
	}
	if !inYoung {
		e.put(hash, en, gen)
	}
	return st, en.m, true
}

// put caches en unless gen is over; a full young go-cache becomes the old one, dropping the old whole.
func (e *Environment) put(hash string, en cacheEntry, gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.half == 0 || gen != e.gen {
		return
	}
	if _, replaces := e.young.Get(hash); !replaces && e.young.ItemCount() >= e.half {
		e.young, e.old = newGoCache(), e.young
	}
	e.young.Set(hash, en, gocache.NoExpiration)
}

// CacheLen is how many entries the environment's cache holds, expired ones included.
func (e *Environment) CacheLen() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.young.ItemCount() + e.old.ItemCount()
}

// Explanation is a read of one context from the store beside the cache's answer: a stale cache
// told from wrong data.
type Explanation struct {
	Answer Answer      // the lookup's answer from this read (never from the cache)
	Cached *Membership // the membership the cache holds for the hash, nil if none
	Status StoreStatus // the environment's last polled status
}

// Explain reads hash from the store whatever the cache holds, caching nothing, bounded as a batch
// is (a slot of the batches' half), so that explains leave lookups slots of their own.
func (e *Environment) Explain(ctx context.Context, hash string) Explanation {
	ctx, cancel := e.svc.withTimeout(ctx)
	defer cancel()
	st, _ := e.firstStatus(ctx)
	x := Explanation{Status: *st, Answer: Answer{ContextHash: hash, Status: st.LookupStatus()}}
	if _, m, hit := e.get(hash); hit {
		x.Cached = &m
	}
	if r := e.readStore(ctx, []string{hash}, e.batchSlots, e.slots)[0]; r.Err != nil {
		x.Answer.Status, x.Answer.Err = StoreError, r.Err
	} else {
		x.Answer.Membership = r.Membership
	}
	return x
}
