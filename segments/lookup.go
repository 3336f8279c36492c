package segments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrStoreUnreachable is the error of a lookup that was not even tried because the last status
// poll could not reach the store: the poller, not every lookup, finds out when it is back.
var ErrStoreUnreachable = errors.New("the Big Segment store is unreachable")

// readErrorLogInterval is the least time between two log lines about failed membership reads.
const readErrorLogInterval = 10 * time.Second

// Answer is what a lookup answers for one context.
type Answer struct {
	// ContextHash is the hash the store was (or would have been) read with.
	ContextHash string
	// Membership is the context's membership; empty when Err is set.
	Membership Membership
	// Status is StoreError when Err is set, otherwise the status of the store.
	Status LookupStatus
	// Err says why the membership could not be read.
	Err error
	// Cached is true when the answer came from the cache.
	Cached bool
}

// LookupHash answers for the context with the given hash: Hash of its key, or a hash from a
// caller, which should be checked with ValidateHash first (LookupHash reads whatever it is
// given). Before the first status poll has finished it polls inline, within the lookup timeout.
func (s *Service) LookupHash(ctx context.Context, hash string) Answer {
	st := s.status.Load()
	if st == nil { // before the first poll has finished: poll inline, within the lookup timeout
		var cancel context.CancelFunc
		ctx, cancel = s.withTimeout(ctx)
		defer cancel()
		current := s.currentStatus(ctx)
		st = &current
	}
	if m, ok := s.cache.get(hash); ok {
		return s.answer(hash, m, st.LookupStatus(), true)
	}
	if st.Unreachable {
		return s.failed(hash, ErrStoreUnreachable)
	}
	cl := s.reads.get(hash)
	if err := s.await(ctx, cl); err != nil {
		err = fmt.Errorf("read membership: %w", err)
		s.readFailed(ctx, hash, err)
		return s.failed(hash, err)
	}
	if cl.err != nil {
		return s.failed(hash, cl.err)
	}
	s.cache.set(hash, cl.m, cl.generation, s.cacheFor(*st))
	return s.answer(hash, cl.m, st.LookupStatus(), false)
}

// LookupBatch answers for many contexts at once, in order. Every cache miss of the batch is
// read from the store in one call (one pipelined round trip on Redis), which waits for a read
// slot like any other; a context asked for twice is read once.
func (s *Service) LookupBatch(ctx context.Context, hashes []string) []Answer {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	status := s.currentStatus(ctx)
	answers := make([]Answer, len(hashes))
	missing := make(map[string]int) // hash -> index into toRead
	var toRead []string
	for i, h := range hashes {
		if m, ok := s.cache.get(h); ok {
			answers[i] = s.answer(h, m, status.LookupStatus(), true)
			continue
		}
		if _, ok := missing[h]; !ok {
			missing[h] = len(toRead)
			toRead = append(toRead, h)
		}
		answers[i].ContextHash = h
	}
	if len(toRead) == 0 {
		return answers
	}
	var reads []Read
	var gen uint64
	if status.Unreachable {
		reads = failAll(len(toRead), ErrStoreUnreachable)
	} else {
		reads, gen = s.readStore(ctx, toRead)
	}
	for i, a := range answers {
		if a.Cached {
			continue
		}
		r := reads[missing[a.ContextHash]]
		if r.Err != nil {
			answers[i] = s.failed(a.ContextHash, r.Err)
			continue
		}
		s.cache.set(a.ContextHash, r.Membership, gen, s.cacheFor(status))
		answers[i] = s.answer(a.ContextHash, r.Membership, status.LookupStatus(), false)
	}
	return answers
}

func (s *Service) answer(hash string, m Membership, status LookupStatus, cached bool) Answer {
	s.obs.Lookup(status, cached)
	return Answer{ContextHash: hash, Membership: m, Status: status, Cached: cached}
}

func (s *Service) failed(hash string, err error) Answer {
	s.obs.Lookup(StoreError, false)
	return Answer{ContextHash: hash, Status: StoreError, Err: err}
}

// errLookupTimeout is the cause of a lookup's context ending at the service's own timeout.
type errLookupTimeout struct{ d time.Duration }

func (e errLookupTimeout) Error() string { return fmt.Sprintf("no answer within %v", e.d) }

// Is makes a lookup timeout a deadline exceeded, as errors.Is tells it (the error codes of
// logs and metrics say deadline_exceeded for both).
func (e errLookupTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// withTimeout bounds ctx by the lookup timeout, if there is one.
func (s *Service) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.lookupTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, s.lookupTimeout, s.timeoutCause)
}

// await waits until cl is read, ctx ends or the lookup timeout passes, whichever is first:
// with a timer of its own, not a context with a deadline (which costs a miss five more
// allocations, and a place among the request context's children).
func (s *Service) await(ctx context.Context, cl *call) error {
	var timeout <-chan time.Time // nil, never ready, without a lookup timeout
	if s.lookupTimeout > 0 {
		t := time.NewTimer(s.lookupTimeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-cl.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-timeout:
		return s.timeoutCause
	}
}

// readDetached reads for the coalescer, on a context of its own: one caller giving up must
// not fail the others waiting on the same read.
func (s *Service) readDetached(hashes []string) ([]Read, uint64) {
	ctx, cancel := s.withTimeout(context.Background())
	defer cancel()
	return s.readStore(ctx, hashes)
}

// readStore reads memberships from the store once a read slot is free, timing the read for
// the observer, and returns them with the cache generation the read started in: what it read
// may be cached only while that generation lasts. It always returns one Read per hash: a store
// that panics or answers for the wrong number of contexts fails this read, not the process.
func (s *Service) readStore(ctx context.Context, hashes []string) (reads []Read, gen uint64) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		err := fmt.Errorf("read membership: %w", context.Cause(ctx))
		s.readFailed(ctx, hashes[0], err)
		return failAll(len(hashes), err), 0
	}
	gen = s.cache.currentGeneration()
	start := time.Now()
	reads, err := s.storeMemberships(ctx, hashes)
	if err != nil {
		err = fmt.Errorf("read membership: %w", err)
		s.readFailed(ctx, hashes[0], err)
		s.obs.StoreRead(OpMemberships, time.Since(start), err)
		return failAll(len(hashes), err), gen
	}
	for i := range reads {
		if reads[i].Err == nil && !reads[i].Membership.validUTF8() {
			reads[i] = Read{Err: fmt.Errorf("%w: a segment ref is not valid UTF-8", ErrInvalidData)}
		}
		if reads[i].Err != nil {
			reads[i].Err = fmt.Errorf("read membership: %w", reads[i].Err)
			err = reads[i].Err
			s.readFailed(ctx, hashes[i], err)
		}
	}
	s.obs.StoreRead(OpMemberships, time.Since(start), err)
	return reads, gen
}

// storeMemberships calls the store, and fails the whole read when the store breaks its
// contract: by panicking (a bug in one store must not take the process down) or by answering
// for another number of contexts than asked (the reads could not be matched to hashes).
func (s *Service) storeMemberships(ctx context.Context, hashes []string) (reads []Read, err error) {
	defer func() {
		if v := recover(); v != nil {
			reads, err = nil, fmt.Errorf("store panicked: %v", v)
		}
	}()
	reads = s.store.Memberships(ctx, hashes)
	if len(reads) != len(hashes) {
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

// errorLog is when a failed read was last logged, and how many failed since.
type errorLog struct {
	mu     sync.Mutex
	logged time.Time
	unsaid int
}

// readFailed logs a failed read, by hash (context keys are personal data), at most once per
// readErrorLogInterval with the number of failures since the last line: an outage makes a few
// lines, not one per lookup (the status change is logged anyway). A read its caller gave up on
// is not the store's fault.
func (s *Service) readFailed(ctx context.Context, hash string, err error) {
	if errors.Is(context.Cause(ctx), context.Canceled) {
		s.log.Debug("lookup abandoned by its caller", "contextHash", hash)
		return
	}
	e := &s.readErrs
	e.mu.Lock()
	now := s.now()
	if !e.logged.IsZero() && now.Sub(e.logged) < readErrorLogInterval {
		e.unsaid++
		e.mu.Unlock()
		return
	}
	unsaid := e.unsaid
	e.logged, e.unsaid = now, 0
	e.mu.Unlock()
	attrs := []slog.Attr{slog.String("contextHash", hash), slog.String("err", err.Error()), slog.Int("failedSinceLastLog", unsaid)}
	if s.errorCode != nil {
		attrs = append(attrs, slog.String("code", s.errorCode(err)))
	}
	s.log.LogAttrs(ctx, slog.LevelWarn, "membership read failed", attrs...)
}
