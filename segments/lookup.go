package segments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
)

const (
	maxReadBatch         = 256              // misses in one read of a reader, at most
	readErrorLogInterval = 10 * time.Second // between two log lines of failed reads, at least
)

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
		return e.tracedLookup(ctx, hash)
	}
	return e.lookupHash(ctx, hash)
}

func (e *Environment) lookupHash(ctx context.Context, hash string) Answer {
	st := e.status.Load()
	if st == nil {
		var cancel context.CancelFunc
		ctx, cancel = e.svc.withTimeout(ctx)
		defer cancel()
		st = e.firstStatus(ctx)
	}
	if m, ok := e.cache.get(hash); ok {
		return e.answer(hash, m, st.LookupStatus(), true)
	}
	if st.Unreachable {
		return e.failed(hash, ErrStoreUnreachable)
	}
	m, err := e.await(ctx, hash)
	if err != nil {
		return e.failed(hash, e.readFailed(ctx, hash, err))
	}
	return e.read(hash, m.read, m.gen, st)
}

// read answers for what the store read of hash in generation gen, and caches it.
func (e *Environment) read(hash string, r Read, gen uint64, st *StoreStatus) Answer {
	if r.Err != nil {
		return e.failed(hash, r.Err)
	}
	ttl := e.svc.cacheTTL
	if st.Cursor != "" {
		ttl = e.svc.cursorTTL
	}
	e.cache.set(hash, r.Membership, gen, ttl)
	return e.answer(hash, r.Membership, st.LookupStatus(), false)
}

func (e *Environment) answer(hash string, m Membership, status LookupStatus, cached bool) Answer {
	e.obs.Lookup(status, cached)
	return Answer{ContextHash: hash, Membership: m, Status: status, Cached: cached}
}

func (e *Environment) failed(hash string, err error) Answer {
	e.obs.Lookup(StoreError, false)
	return Answer{ContextHash: hash, Status: StoreError, Err: err}
}

// miss is one hash being read for every lookup of it.
type miss struct {
	hash         string
	done         chan struct{} // closed once read and gen are set
	read         Read
	gen          uint64            // the cache generation the read started in
	caller, span trace.SpanContext // the traced lookup that asked for the read, and the read's
}

// await reads hash once for all its lookups, by a reader of Run's or, while Run keeps none,
// alone, until it is read, ctx ends or the lookup timeout passes (a timer of its own: a context
// with a deadline costs five allocations more). A miss no reader takes in time is given up.
func (e *Environment) await(ctx context.Context, hash string) (*miss, error) {
	caller := e.caller(ctx)
	ch := e.flight.DoChan(hash, func() (any, error) {
		m := &miss{hash: hash, done: make(chan struct{}), caller: caller}
		queued, stop := e.svc.lookupTimer()
		defer stop()
		select {
		case e.misses <- m:
			<-m.done
		case <-*e.svc.readers.Load():
			e.readBatch([]*miss{m})
		case <-queued:
			m.read.Err = e.svc.timeout
		}
		return m, nil
	})
	timeout, stop := e.svc.lookupTimer()
	defer stop()
	select {
	case r := <-ch:
		linkRead(ctx, r.Val.(*miss))
		return r.Val.(*miss), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-timeout:
		return nil, e.svc.timeout
	}
}

// readMisses is a reader of Run's: it reads a miss and every miss already waiting in one call.
func (e *Environment) readMisses(ctx context.Context) {
	batch := make([]*miss, 0, maxReadBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-e.misses:
			batch = append(batch[:0], m)
		}
	more:
		for len(batch) < maxReadBatch {
			select {
			case m := <-e.misses:
				batch = append(batch, m)
			default:
				break more
			}
		}
		e.readBatch(batch)
		clear(batch)
	}
}

// readBatch reads batch on a context of its own: one caller giving up fails no one else.
func (e *Environment) readBatch(batch []*miss) {
	hashes, callers := make([]string, len(batch)), make([]trace.SpanContext, len(batch))
	for i, m := range batch {
		hashes[i], callers[i] = m.hash, m.caller
	}
	ctx, cancel := e.svc.withTimeout(context.Background())
	defer cancel()
	ctx, span := e.startRead(ctx, len(hashes), callers...)
	reads, gen := e.readStore(ctx, hashes)
	endRead(span, reads)
	for i, m := range batch {
		m.read, m.gen = reads[i], gen
		if span != nil {
			m.span = span.SpanContext()
		}
		close(m.done)
	}
}

// LookupBatch answers for many contexts at once, in order, reading the misses in one store call.
func (e *Environment) LookupBatch(ctx context.Context, hashes []string) []Answer {
	if e.traced(ctx) {
		return e.tracedBatch(ctx, hashes)
	}
	return e.lookupBatch(ctx, hashes)
}

func (e *Environment) lookupBatch(ctx context.Context, hashes []string) []Answer {
	ctx, cancel := e.svc.withTimeout(ctx)
	defer cancel()
	st := e.firstStatus(ctx)
	answers, missing := make([]Answer, len(hashes)), make(map[string]int) // hash -> index into toRead
	var toRead []string
	for i, h := range hashes {
		if m, ok := e.cache.get(h); ok {
			answers[i] = e.answer(h, m, st.LookupStatus(), true)
		} else if _, ok := missing[h]; !ok {
			missing[h] = len(toRead)
			toRead = append(toRead, h)
		}
	}
	if len(toRead) == 0 {
		return answers
	}
	reads, gen := failAll(len(toRead), ErrStoreUnreachable), uint64(0)
	if !st.Unreachable {
		ctx, span := e.startRead(ctx, len(toRead))
		reads, gen = e.readStore(ctx, toRead)
		endRead(span, reads)
	}
	for i, h := range hashes {
		if !answers[i].Cached {
			answers[i] = e.read(h, reads[missing[h]], gen, st)
		}
	}
	return answers
}

// lookupTimer is a channel ready once the lookup timeout has passed (never, without one), and
// what stops its timer.
func (s *Service) lookupTimer() (<-chan time.Time, func() bool) {
	if s.lookupTimeout <= 0 {
		return nil, func() bool { return false }
	}
	t := time.NewTimer(s.lookupTimeout)
	return t.C, t.Stop
}

// withTimeout bounds ctx by the lookup timeout, if there is one.
func (s *Service) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.lookupTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, s.lookupTimeout, s.timeout)
}

// readStore reads memberships once a read slot is free, with the cache generation the read
// started in: one Read per hash, always (a store that panics or miscounts fails the read).
func (e *Environment) readStore(ctx context.Context, hashes []string) ([]Read, uint64) {
	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	case <-ctx.Done():
		return failAll(len(hashes), e.readFailed(ctx, hashes[0], context.Cause(ctx))), 0
	}
	gen, start := e.cache.currentGeneration(), time.Now()
	reads, err := e.storeMemberships(ctx, hashes)
	if err != nil {
		err = e.readFailed(ctx, hashes[0], err)
		e.obs.StoreRead(OpMemberships, time.Since(start), err)
		return failAll(len(hashes), err), gen
	}
	for i := range reads {
		if reads[i].Err == nil && !reads[i].Membership.validUTF8() {
			reads[i] = Read{Err: fmt.Errorf("%w: a segment ref is not valid UTF-8", ErrInvalidData)}
		}
		if reads[i].Err != nil {
			err = e.readFailed(ctx, hashes[i], reads[i].Err)
			reads[i].Err = err
		}
	}
	e.obs.StoreRead(OpMemberships, time.Since(start), err)
	return reads, gen
}

func (e *Environment) storeMemberships(ctx context.Context, hashes []string) (reads []Read, err error) {
	defer func() {
		if v := recover(); v != nil {
			reads, err = nil, fmt.Errorf("store panicked: %v", v)
		}
	}()
	if reads = e.Store.Memberships(ctx, hashes); len(reads) != len(hashes) {
		return nil, fmt.Errorf("store returned %d reads for %d contexts", len(reads), len(hashes))
	}
	return reads, nil
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
	r, now := e.readErrs, e.svc.now()
	r.mu.Lock()
	if !r.logged.IsZero() && now.Sub(r.logged) < readErrorLogInterval {
		r.unsaid++
		r.mu.Unlock()
		return err
	}
	unsaid := r.unsaid
	r.logged, r.unsaid = now, 0
	r.mu.Unlock()
	e.log.Log(ctx, slog.LevelWarn, "membership read failed", append([]any{"contextHash", hash, "failedSinceLastLog", unsaid}, e.svc.errAttrs(err)...)...)
	return err
}
