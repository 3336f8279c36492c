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

	gocache "github.com/patrickmn/go-cache"
	"golang.org/x/sync/singleflight"
)

const (
	cursorTTL            = time.Hour        // an answer's TTL while the store has a cursor (a new one drops it sooner)
	readErrorLogInterval = 10 * time.Second // between two log lines of failed reads, at least
)

// Environment is one environment served: its name (in routes, tokens' scopes and metrics),
// the key prefix of its data and its store; New adds its status and cache.
type Environment struct {
	Name   string
	Prefix string // the key prefix SDKs read its data under (their Redis stores need one: launchdarkly where the store has none)
	Store  Store

	svc    *Service
	log    *slog.Logger
	obs    Observer
	*state // behind a pointer, so that Environments are values callers can copy
}

type state struct {
	mu         sync.RWMutex   // guards the fields up to flight
	status     *StoreStatus   // nil before the first poll
	young, old *gocache.Cache // the cache, a pair of one generation (see the package documentation); nil: off
	half       int            // entries per go-cache, at most
	gen        uint64         // the cache generation
	logged     time.Time      // when a failed read was last logged
	unsaid     int            // failed reads since then
	inventory  Inventory

	flight     singleflight.Group // one read of a hash a generation, shared by its lookups
	slots      chan struct{}      // the semaphore of store reads in flight
	batchSlots chan struct{}      // batches' share of them: at most half, so that single lookups always have some
}

// newGoCache is a go-cache whose expiry, on time.Now, is off: entries carry their own.
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

// LookupHash answers for the context with the given hash (Hash of its key, or a caller's
// hash checked with ValidateHash).
func (e *Environment) LookupHash(ctx context.Context, hash string) Answer {
	if st, _, m, hit := e.get(hash); hit && st != nil {
		return e.answer(hash, m, st.LookupStatus(), true)
	}
	return e.lookup(ctx, []string{hash}, false)[0]
}

// LookupBatch answers for many contexts at once, in order, reading the misses in one store call.
func (e *Environment) LookupBatch(ctx context.Context, hashes []string) []Answer {
	return e.lookup(ctx, hashes, true)
}

func (e *Environment) lookup(ctx context.Context, hashes []string, batch bool) []Answer {
	ctx, cancel := e.svc.withTimeout(ctx)
	defer cancel()
	st, gen := e.firstStatus(ctx)
	answers, missing := make([]Answer, len(hashes)), map[string]int{} // hash -> index into toRead
	var toRead []string
	for i, h := range hashes {
		if _, _, m, hit := e.get(h); hit {
			answers[i] = e.answer(h, m, st.LookupStatus(), true)
		} else if _, ok := missing[h]; !ok {
			missing[h] = len(toRead)
			toRead = append(toRead, h)
		}
	}
	reads := slices.Repeat([]Read{{Err: ErrStoreUnreachable}}, len(toRead))
	switch {
	case len(toRead) == 0 || st.Unreachable:
	case batch:
		reads = e.readStore(ctx, toRead, e.batchSlots, e.slots)
	default:
		reads[0] = e.readShared(ctx, toRead[0], gen)
	}
	ttl := e.svc.cacheTTL
	if st.Cursor != "" {
		ttl = cursorTTL
	}
	for i, h := range hashes {
		if answers[i].Cached {
			continue
		}
		if r := reads[missing[h]]; r.Err != nil {
			answers[i] = Answer{ContextHash: h, Status: StoreError, Err: r.Err}
			if !errors.Is(r.Err, context.Canceled) { // a caller that left: nobody was answered, and the store not at fault
				e.obs.Lookup(StoreError, false)
			}
		} else {
			e.put(h, cacheEntry{r.Membership, e.svc.now().Add(ttl).UnixNano()}, gen)
			answers[i] = e.answer(h, r.Membership, st.LookupStatus(), false)
		}
	}
	return answers
}

func (e *Environment) answer(hash string, m Membership, status LookupStatus, cached bool) Answer {
	e.obs.Lookup(status, cached)
	return Answer{ContextHash: hash, Membership: m, Status: status, Cached: cached}
}

// readShared reads hash once for every lookup of it begun in cache generation gen, in the
// first caller's context: if that caller goes before the lookup timeout, the others read again.
func (e *Environment) readShared(ctx context.Context, hash string, gen uint64) Read {
	for key := strconv.FormatUint(gen, 10) + " " + hash; ; {
		ch := e.flight.DoChan(key, func() (any, error) {
			r := e.readStore(ctx, []string{hash}, e.slots)[0]
			if r.Err == nil || context.Cause(ctx) == e.svc.timeout {
				return r, nil // read, or given the whole lookup timeout: the store's answer
			}
			return r, ctx.Err() // not nil: its first caller left before it was read
		})
		select {
		case res := <-ch:
			if res.Err == nil || ctx.Err() != nil {
				return res.Val.(Read)
			} // else read again, for this caller and those waiting with it
		case <-ctx.Done():
			return Read{Err: e.readFailed(ctx, hash, context.Cause(ctx))}
		}
	}
}

// readStore reads memberships once it holds a slot of each semaphore, taken under ctx. It
// returns one Read per hash, always: a store that panics or miscounts fails the read.
func (e *Environment) readStore(ctx context.Context, hashes []string, sems ...chan struct{}) []Read {
	for _, sem := range sems {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		case <-ctx.Done():
			return slices.Repeat([]Read{{Err: e.readFailed(ctx, hashes[0], context.Cause(ctx))}}, len(hashes))
		}
	}
	start, reads := time.Now(), []Read(nil)
	err := safely(func() { reads = e.Store.Memberships(ctx, hashes) })
	if err == nil && len(reads) != len(hashes) {
		err = fmt.Errorf("store returned %d reads for %d contexts", len(reads), len(hashes))
	}
	if err != nil { // the store's own error is every context's
		reads = slices.Repeat([]Read{{Err: e.readFailed(ctx, hashes[0], err)}}, len(hashes))
	}
	var first error
	for i, r := range reads {
		if r.Err == nil && !r.Membership.validUTF8() {
			r = Read{Err: e.readFailed(ctx, hashes[i], fmt.Errorf("%w: a segment ref is not valid UTF-8", ErrInvalidData))}
		} else if r.Err != nil && err == nil {
			r.Err = e.readFailed(ctx, hashes[i], r.Err)
		}
		reads[i], first = r, cmp.Or(first, r.Err)
	}
	e.obs.StoreRead(OpMemberships, time.Since(start), first)
	return reads
}

// safely runs a store call, a panic in it an error (on DoChan's goroutine, it would end the process).
func safely(call func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("store panicked: %v", v)
		}
	}()
	call()
	return nil
}

// readFailed wraps err as a failed read of hash and logs it, at most once per interval.
func (e *Environment) readFailed(ctx context.Context, hash string, err error) error {
	err = fmt.Errorf("read membership: %w", err)
	if errors.Is(context.Cause(ctx), context.Canceled) {
		e.log.Debug("lookup abandoned by its caller", "contextHash", hash)
		return err
	}
	now := e.svc.now()
	e.mu.Lock()
	unsaid, quiet := e.unsaid, !e.logged.IsZero() && now.Sub(e.logged) < readErrorLogInterval
	if e.unsaid++; !quiet {
		e.logged, e.unsaid = now, 0
	}
	e.mu.Unlock()
	if !quiet {
		e.log.WarnContext(ctx, "membership read failed", append([]any{"contextHash", hash, "failedSinceLastLog", unsaid}, e.svc.errAttrs(err)...)...)
	}
	return err
}

// get returns the status, the cache generation and the membership cached for hash, if any.
func (e *Environment) get(hash string) (st *StoreStatus, gen uint64, m Membership, hit bool) {
	e.mu.RLock()
	st, gen, young, old := e.status, e.gen, e.young, e.old
	e.mu.RUnlock()
	if young == nil {
		return st, gen, m, false
	}
	v, inYoung := young.Get(hash)
	if !inYoung {
		v, _ = old.Get(hash)
	}
	en, hit := v.(cacheEntry)
	if !hit || e.svc.now().UnixNano() >= en.expires {
		return st, gen, m, false
	}
	if !inYoung {
		e.put(hash, en, gen)
	}
	return st, gen, en.m, true
}

// put caches en for hash unless its generation gen is over.
func (e *Environment) put(hash string, en cacheEntry, gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.young == nil || gen != e.gen {
		return
	}
	if _, replaces := e.young.Get(hash); !replaces && e.young.ItemCount() >= e.half {
		e.young, e.old = newGoCache(), e.young
	}
	e.young.Set(hash, en, gocache.NoExpiration)
}

// CacheLen is how many entries the environment's cache holds.
func (e *Environment) CacheLen() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.young == nil {
		return 0
	}
	return e.young.ItemCount() + e.old.ItemCount()
}
