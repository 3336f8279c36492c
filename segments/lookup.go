package segments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

const readErrorLogInterval = 10 * time.Second // between two log lines of failed reads, at least

// Answer is what a lookup answers for one context.
type Answer struct {
	ContextHash string       // the hash the store was (or would have been) read with
	Membership  Membership   // empty when Err is set
	Status      LookupStatus // StoreError when Err is set, else the store's
	Err         error        // why the membership could not be read
	Cached      bool         // the answer came from the cache
}

// LookupHash answers for the context with the given hash (Hash of its key, or a caller's
// hash checked with ValidateHash). Before the first poll has finished it polls inline.
func (e *Environment) LookupHash(ctx context.Context, hash string) Answer {
	if e.traced(ctx) {
		return e.tracedLookup(ctx, []string{hash}, false)[0]
	}
	return e.lookupHash(ctx, hash)
}

func (e *Environment) lookupHash(ctx context.Context, hash string) Answer {
	st, gen, m, hit := e.get(hash)
	if st == nil {
		var cancel context.CancelFunc
		ctx, cancel = e.svc.withTimeout(ctx)
		defer cancel()
		st, gen = e.firstStatus(ctx)
		_, _, m, hit = e.get(hash)
	}
	if hit {
		return e.answer(hash, m, st.LookupStatus(), true)
	}
	if st.Unreachable {
		return e.failed(hash, ErrStoreUnreachable)
	}
	return e.read(hash, e.readShared(ctx, hash, gen), gen, st)
}

// readShared reads hash once for every lookup of it that began in cache generation gen, and
// never for one that began in another: a lookup that begins after a change never gets a read
// begun before it. The read runs in the first caller's context: it takes a read slot only
// while that caller waits, and if that caller goes before the lookup timeout, the others read
// again. A read that took the whole lookup timeout failed for all: the store is that slow.
func (e *Environment) readShared(ctx context.Context, hash string, gen uint64) Read {
	ctx, cancel := e.svc.withTimeout(ctx)
	defer cancel()
	key := strconv.FormatUint(gen, 10) + " " + hash
	for {
		// DoChan, so that each caller waits only as long as its own context lasts; the read
		// recovers a store's panic, which would otherwise end the process on DoChan's goroutine.
		ch := e.flight.DoChan(key, func() (any, error) {
			r := e.readStore(ctx, []string{hash}, e.slots)[0]
			if r.Err == nil || context.Cause(ctx) == e.svc.timeout {
				return r, nil // read, or given the whole lookup timeout: the store's answer
			}
			return r, ctx.Err() // not nil: its first caller left before it was read
		})
		select {
		case res := <-ch:
			if res.Err != nil && ctx.Err() == nil {
				continue // read again, for this caller and those waiting with it
			}
			return res.Val.(Read)
		case <-ctx.Done():
			return Read{Err: e.readFailed(ctx, hash, context.Cause(ctx))}
		}
	}
}

// read answers for what the store read of hash in generation gen, and caches it.
func (e *Environment) read(hash string, r Read, gen uint64, st *StoreStatus) Answer {
	if r.Err != nil {
		return e.failed(hash, r.Err)
	}
	e.put(hash, cacheEntry{m: r.Membership, expires: e.svc.now().Add(e.svc.ttlFor(st)).UnixNano()}, gen)
	return e.answer(hash, r.Membership, st.LookupStatus(), false)
}

func (e *Environment) answer(hash string, m Membership, status LookupStatus, cached bool) Answer {
	e.obs.Lookup(status, cached)
	return Answer{ContextHash: hash, Membership: m, Status: status, Cached: cached}
}

// failed answers StoreError for err. A lookup whose caller left is not counted: nobody was
// answered, and the store was not at fault.
func (e *Environment) failed(hash string, err error) Answer {
	if !errors.Is(err, context.Canceled) {
		e.obs.Lookup(StoreError, false)
	}
	return Answer{ContextHash: hash, Status: StoreError, Err: err}
}

// LookupBatch answers for many contexts at once, in order, reading the misses in one store call.
func (e *Environment) LookupBatch(ctx context.Context, hashes []string) []Answer {
	if e.traced(ctx) {
		return e.tracedLookup(ctx, hashes, true)
	}
	return e.lookupBatch(ctx, hashes)
}

func (e *Environment) lookupBatch(ctx context.Context, hashes []string) []Answer {
	ctx, cancel := e.svc.withTimeout(ctx)
	defer cancel()
	st, gen := e.firstStatus(ctx)
	answers, missing := make([]Answer, len(hashes)), make(map[string]int) // hash -> index into toRead
	var toRead []string
	for i, h := range hashes {
		if _, _, m, hit := e.get(h); hit {
			answers[i] = e.answer(h, m, st.LookupStatus(), true)
		} else if _, ok := missing[h]; !ok {
			missing[h] = len(toRead)
			toRead = append(toRead, h)
		}
	}
	if len(toRead) == 0 {
		return answers
	}
	reads := failAll(len(toRead), ErrStoreUnreachable)
	if !st.Unreachable {
		reads = e.readStore(ctx, toRead, e.batchSlots, e.slots)
	}
	for i, h := range hashes {
		if !answers[i].Cached {
			answers[i] = e.read(h, reads[missing[h]], gen, st)
		}
	}
	return answers
}

// withTimeout bounds ctx by the lookup timeout, if there is one.
func (s *Service) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.lookupTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, s.lookupTimeout, s.timeout)
}

// readStore reads memberships once it holds a slot of each semaphore, taken under ctx: a
// caller that has gone takes none. It returns one Read per hash, always (a store that panics
// or miscounts fails the read).
func (e *Environment) readStore(ctx context.Context, hashes []string, sems ...chan struct{}) []Read {
	for _, sem := range sems {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		case <-ctx.Done():
			return failAll(len(hashes), e.readFailed(ctx, hashes[0], context.Cause(ctx)))
		}
	}
	ctx, end := e.svc.span(ctx, "read", false)
	start := time.Now()
	reads, err := e.storeMemberships(ctx, hashes)
	if err != nil {
		reads = failAll(len(hashes), e.readFailed(ctx, hashes[0], err))
	}
	failed := 0
	for i, r := range reads {
		if r.Err == nil && !r.Membership.validUTF8() {
			r = Read{Err: fmt.Errorf("%w: a segment ref is not valid UTF-8", ErrInvalidData)}
		}
		if r.Err != nil && err == nil {
			r.Err = e.readFailed(ctx, hashes[i], r.Err)
		}
		if reads[i] = r; r.Err != nil {
			failed++
		}
	}
	err = firstErr(reads) // the store's own error, if it failed, is every context's
	e.obs.StoreRead(OpMemberships, time.Since(start), err)
	end(err, attribute.String("bigseg.environment", e.Name), attribute.Int("bigseg.read.contexts", len(hashes)), attribute.Int("bigseg.read.failed", failed))
	return reads
}

func (e *Environment) storeMemberships(ctx context.Context, hashes []string) (reads []Read, err error) {
	if err := safely(func() { reads = e.Store.Memberships(ctx, hashes) }); err != nil {
		return nil, err
	}
	if len(reads) != len(hashes) {
		return nil, fmt.Errorf("store returned %d reads for %d contexts", len(reads), len(hashes))
	}
	return reads, nil
}

// safely runs a store call, a panic in it an error: a store that panics fails its read, on
// every path, and the process goes on.
func safely(call func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("store panicked: %v", v)
		}
	}()
	call()
	return nil
}

func firstErr(reads []Read) error {
	for _, r := range reads {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func failAll(n int, err error) []Read {
	reads := make([]Read, n)
	for i := range reads {
		reads[i].Err = err
	}
	return reads
}

// readFailed wraps err as a failed read of hash and logs it, spaced out, by hash: keys are
// personal data.
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
		e.log.Log(ctx, slog.LevelWarn, "membership read failed", append([]any{"contextHash", hash, "failedSinceLastLog", unsaid}, e.svc.errAttrs(err)...)...)
	}
	return err
}
