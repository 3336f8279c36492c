package segments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults, the same as the LaunchDarkly SDKs' except the cache size, which suits a shared
// service better than a single SDK's 1000.
const (
	DefaultCacheSize     = 100_000
	DefaultCacheTTL      = 5 * time.Second
	DefaultPollInterval  = 5 * time.Second
	DefaultStaleAfter    = 2 * time.Minute
	DefaultLookupTimeout = time.Second
)

// recoveryPollInterval is how often the status is polled while the store is unreachable, if
// the poll interval is longer: lookups fail fast meanwhile, so recovery should be seen soon.
const recoveryPollInterval = time.Second

// readErrorLogInterval is the least time between two log lines about failed membership reads.
const readErrorLogInterval = 10 * time.Second

// ErrStoreUnreachable is the error of a lookup that was not even tried because the last status
// poll could not reach the store: the poller, not every lookup, finds out when it is back.
var ErrStoreUnreachable = errors.New("the Big Segment store is unreachable")

// ErrInvalidMetadata marks a Metadata error where the store answered, but with data that is
// not valid metadata: the store is unavailable, but reachable, so lookups still read it.
var ErrInvalidMetadata = errors.New("invalid Big Segment metadata")

// Service answers which Big Segments a context is in: it hashes keys, serves recent answers
// from a bounded cache, reads the store on misses (one read for concurrent misses of the same
// context), and keeps the store's status up to date while Run runs.
type Service struct {
	store         Store
	cache         *cache
	pollInterval  time.Duration
	staleAfter    time.Duration
	lookupTimeout time.Duration
	now           func() time.Time
	log           *slog.Logger
	obs           Observer

	reads *coalescer
	slots chan struct{}      // store reads in flight, of single lookups and batches alike
	polls singleflight.Group // one key: inline polls before the first scheduled one

	maxReadsInFlight, maxReadBatch int

	pollLock chan struct{} // one poll at a time, so that each status follows the one before it
	status   atomic.Pointer[StoreStatus]

	subsMu sync.Mutex
	subs   map[*subscription]struct{}

	readyRequiresFresh bool
	draining           atomic.Bool

	readErrMu      sync.Mutex
	readErrLogged  time.Time // when a failed read was last logged
	readErrsUnsaid int       // failed reads since then

	// joined, when set by tests, is called by each caller once it waits on a shared read.
	joined func()
}

// Option configures a Service.
type Option func(*Service)

// WithCache sets the membership cache's entry bound and TTL. Either at zero turns the cache
// off. Defaults: DefaultCacheSize, DefaultCacheTTL.
func WithCache(size int, ttl time.Duration) Option {
	return func(s *Service) { s.cache = newCache(size, ttl, nil) }
}

// WithPollInterval sets how often Run polls the store's status; it is capped at staleAfter so
// that staleness is never noticed later than it happens. Default DefaultPollInterval.
func WithPollInterval(d time.Duration) Option {
	return func(s *Service) { s.pollInterval = d }
}

// WithStaleAfter sets how old the last synchronization may be before the data counts as
// stale. Default DefaultStaleAfter.
func WithStaleAfter(d time.Duration) Option {
	return func(s *Service) { s.staleAfter = d }
}

// WithLookupTimeout bounds how long a lookup (or batch, or status poll) may take in all,
// waiting for the store included: past it, the lookup answers StoreError. Zero means no bound
// of the service's own. Default DefaultLookupTimeout.
func WithLookupTimeout(d time.Duration) Option {
	return func(s *Service) { s.lookupTimeout = d }
}

// WithClock replaces time.Now for staleness and cache expiry, so tests can move time.
func WithClock(now func() time.Time) Option {
	return func(s *Service) { s.now = now }
}

// WithLogger sets where status changes and failed reads are logged. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(s *Service) { s.log = l }
}

// WithObserver sets who is told about lookups, reads and polls (metrics).
func WithObserver(o Observer) Option {
	return func(s *Service) { s.obs = o }
}

// WithCoalescing bounds how many membership reads run at once (single lookups and batches
// alike), and how many cache misses one of them may carry (misses that arrive while all are
// busy are read together, in one store call). Defaults: DefaultMaxReadsInFlight,
// DefaultMaxReadBatch.
func WithCoalescing(maxInFlight, maxBatch int) Option {
	return func(s *Service) { s.maxReadsInFlight, s.maxReadBatch = maxInFlight, maxBatch }
}

// WithReadyRequiresFresh makes Readiness false while the data is stale, not only while the
// store is unavailable.
func WithReadyRequiresFresh(b bool) Option {
	return func(s *Service) { s.readyRequiresFresh = b }
}

// New returns a Service reading store. It starts nothing: call Run to poll the store's status.
func New(store Store, opts ...Option) *Service {
	s := &Service{
		store:         store,
		cache:         newCache(DefaultCacheSize, DefaultCacheTTL, nil),
		pollInterval:  DefaultPollInterval,
		staleAfter:    DefaultStaleAfter,
		lookupTimeout: DefaultLookupTimeout,
		now:           time.Now,
		log:           slog.New(slog.DiscardHandler),
		obs:           nopObserver{},
		subs:          make(map[*subscription]struct{}),
		pollLock:      make(chan struct{}, 1),

		maxReadsInFlight: DefaultMaxReadsInFlight,
		maxReadBatch:     DefaultMaxReadBatch,
	}
	for _, o := range opts {
		o(s)
	}
	s.maxReadsInFlight = max(s.maxReadsInFlight, 1)
	s.slots = make(chan struct{}, s.maxReadsInFlight)
	s.reads = newCoalescer(s.readDetached, s.maxReadsInFlight, s.maxReadBatch)
	if s.cache != nil {
		s.cache.now = s.now
	}
	if s.staleAfter <= 0 {
		s.staleAfter = DefaultStaleAfter
	}
	if s.pollInterval <= 0 {
		s.pollInterval = DefaultPollInterval
	}
	s.pollInterval = min(s.pollInterval, s.staleAfter)
	return s
}

// PollInterval is the interval Run polls at, after capping at staleAfter.
func (s *Service) PollInterval() time.Duration { return s.pollInterval }

// StaleAfter is the configured staleness threshold.
func (s *Service) StaleAfter() time.Duration { return s.staleAfter }

// CacheLen is the number of cached memberships, including expired ones not yet dropped.
func (s *Service) CacheLen() int { return s.cache.len() }

// Result is the answer for one context.
type Result struct {
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

// Lookup answers for the context with the given key.
func (s *Service) Lookup(ctx context.Context, contextKey string) Result {
	return s.LookupHash(ctx, Hash(contextKey))
}

// LookupHash answers for the context with the given hash; see ValidateHash.
func (s *Service) LookupHash(ctx context.Context, hash string) Result {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	st := s.currentStatus(ctx)
	if m, ok := s.cache.get(hash); ok {
		status := st.LookupStatus()
		s.obs.Lookup(status, true)
		return Result{ContextHash: hash, Membership: m, Status: status, Cached: true}
	}
	var m Membership
	err := ErrStoreUnreachable
	if !st.Unreachable {
		m, err = s.readShared(ctx, hash)
	}
	if err != nil {
		s.obs.Lookup(StoreError, false)
		return Result{ContextHash: hash, Status: StoreError, Err: err}
	}
	s.cache.set(hash, m)
	status := st.LookupStatus()
	s.obs.Lookup(status, false)
	return Result{ContextHash: hash, Membership: m, Status: status}
}

// errLookupTimeout is the cause of a lookup's context ending at the service's own timeout.
type errLookupTimeout struct{ d time.Duration }

func (e errLookupTimeout) Error() string { return fmt.Sprintf("no answer within %v", e.d) }

// withTimeout bounds ctx by the lookup timeout, if there is one.
func (s *Service) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.lookupTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, s.lookupTimeout, errLookupTimeout{s.lookupTimeout})
}

// readShared reads one membership through the coalescer, sharing the read with concurrent
// callers for the same context and batching it with concurrent misses for others.
func (s *Service) readShared(ctx context.Context, hash string) (Membership, error) {
	cl := s.reads.get(hash)
	if s.joined != nil {
		s.joined()
	}
	select {
	case <-cl.done:
		return cl.m, cl.err
	case <-ctx.Done():
		err := fmt.Errorf("read membership: %w", context.Cause(ctx))
		s.readFailed(ctx, hash, err)
		return Membership{}, err
	}
}

// readDetached reads for the coalescer, on a context of its own: one caller giving up must
// not fail the others waiting on the same read.
func (s *Service) readDetached(hashes []string) []Read {
	ctx, cancel := s.withTimeout(context.Background())
	defer cancel()
	return s.readStore(ctx, hashes)
}

// readStore reads memberships from the store once a read slot is free, timing the read for
// the observer. A store that panics or answers for the wrong number of contexts fails this
// read, not the process.
func (s *Service) readStore(ctx context.Context, hashes []string) (reads []Read) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return s.failAll(ctx, hashes, fmt.Errorf("read membership: %w", context.Cause(ctx)))
	}
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			err := fmt.Errorf("read membership: store panicked: %v", v)
			reads = s.failAll(ctx, hashes, err)
			s.obs.StoreRead(OpMemberships, time.Since(start), err)
		}
	}()
	reads = s.store.Memberships(ctx, hashes)
	if len(reads) != len(hashes) {
		panic(fmt.Sprintf("store returned %d reads for %d contexts", len(reads), len(hashes)))
	}
	var err error
	for i := range reads {
		if reads[i].Err != nil {
			reads[i].Err = fmt.Errorf("read membership: %w", reads[i].Err)
			err = reads[i].Err
			s.readFailed(ctx, hashes[i], err)
		}
	}
	s.obs.StoreRead(OpMemberships, time.Since(start), err)
	return reads
}

func (s *Service) failAll(ctx context.Context, hashes []string, err error) []Read {
	reads := make([]Read, len(hashes))
	for i := range reads {
		reads[i].Err = err
	}
	if len(hashes) > 0 {
		s.readFailed(ctx, hashes[0], err)
	}
	return reads
}

// readFailed logs a failed read, by hash (context keys are personal data), at most once per
// readErrorLogInterval with the number of failures since the last line: an outage makes a few
// lines, not one per lookup. A read its caller gave up on is not the store's fault.
func (s *Service) readFailed(ctx context.Context, hash string, err error) {
	if errors.Is(context.Cause(ctx), context.Canceled) {
		s.log.Debug("lookup abandoned by its caller", "contextHash", hash)
		return
	}
	s.readErrMu.Lock()
	now := s.now()
	if !s.readErrLogged.IsZero() && now.Sub(s.readErrLogged) < readErrorLogInterval {
		s.readErrsUnsaid++
		s.readErrMu.Unlock()
		return
	}
	unsaid := s.readErrsUnsaid
	s.readErrLogged, s.readErrsUnsaid = now, 0
	s.readErrMu.Unlock()
	s.log.Warn("membership read failed", "contextHash", hash, "err", err.Error(), "failedSinceLastLog", unsaid)
}

// LookupBatch answers for many contexts at once, in order. Every cache miss of the batch is
// read from the store in one call (one pipelined round trip on Redis), which waits for a read
// slot like any other; a context asked for twice is read once.
func (s *Service) LookupBatch(ctx context.Context, hashes []string) []Result {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	st := s.currentStatus(ctx)
	status := st.LookupStatus()
	results := make([]Result, len(hashes))
	var misses []int
	missing := make(map[string]int) // hash -> index into toRead
	var toRead []string
	for i, h := range hashes {
		results[i].ContextHash = h
		if m, ok := s.cache.get(h); ok {
			results[i] = Result{ContextHash: h, Membership: m, Status: status, Cached: true}
			s.obs.Lookup(status, true)
			continue
		}
		misses = append(misses, i)
		if _, ok := missing[h]; !ok {
			missing[h] = len(toRead)
			toRead = append(toRead, h)
		}
	}
	if len(toRead) == 0 {
		return results
	}
	var reads []Read
	if st.Unreachable {
		reads = make([]Read, len(toRead))
		for i := range reads {
			reads[i].Err = ErrStoreUnreachable
		}
	} else {
		reads = s.readStore(ctx, toRead)
	}
	for _, i := range misses {
		r := reads[missing[results[i].ContextHash]]
		if r.Err != nil {
			results[i].Status, results[i].Err = StoreError, r.Err
			s.obs.Lookup(StoreError, false)
			continue
		}
		s.cache.set(results[i].ContextHash, r.Membership)
		results[i].Membership, results[i].Status = r.Membership, status
		s.obs.Lookup(status, false)
	}
	return results
}

// Status returns the last polled store status, and false if no poll has completed yet (the
// store then counts as unavailable and stale, as never synchronized). It never reads the store.
func (s *Service) Status() (StoreStatus, bool) {
	if st := s.status.Load(); st != nil {
		return *st, true
	}
	return StoreStatus{Stale: true}, false
}

// currentStatus returns the last polled status, polling inline (once, shared by concurrent
// callers) when there is none yet, so the first lookups after start get a true status.
func (s *Service) currentStatus(ctx context.Context) StoreStatus {
	if st := s.status.Load(); st != nil {
		return *st
	}
	ch := s.polls.DoChan("", func() (any, error) {
		if st := s.status.Load(); st != nil {
			return *st, nil
		}
		return s.Poll(context.WithoutCancel(ctx)), nil
	})
	select {
	case r := <-ch:
		return r.Val.(StoreStatus)
	case <-ctx.Done():
		return StoreStatus{Stale: true, CheckedAt: s.now()}
	}
}

// Poll reads the store's metadata now, records the resulting status, tells subscribers if
// Available or Stale changed, and returns it. Run calls it on schedule. Polls run one at a
// time, so a slow poll never overwrites the status of a later one.
func (s *Service) Poll(ctx context.Context) StoreStatus {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	select {
	case s.pollLock <- struct{}{}:
		defer func() { <-s.pollLock }()
	case <-ctx.Done(): // a poll before it is stuck: its outcome will be the status
		st, _ := s.Status()
		return st
	}
	start := time.Now()
	md, err := s.store.Metadata(ctx)
	s.obs.StoreRead(OpMetadata, time.Since(start), err)

	prev := s.status.Load()
	now := s.now()
	st := StoreStatus{CheckedAt: now}
	if err == nil {
		st.Available = true
		st.LastSynchronized = md.LastSynchronized
	} else {
		st.Unreachable = !errors.Is(err, ErrInvalidMetadata)
		if prev != nil {
			st.LastSynchronized = prev.LastSynchronized
		}
	}
	st.Stale = isStale(st.LastSynchronized, now, s.staleAfter)
	s.status.Store(&st)

	changed := prev == nil || prev.Available != st.Available || prev.Stale != st.Stale
	s.obs.StatusPolled(st, err, changed)
	if changed {
		s.logChange(st, err)
		s.publish(st)
	}
	return st
}

// Drain marks the service as shutting down: from now on Readiness is false, so that load
// balancers stop sending traffic, which is still answered meanwhile.
func (s *Service) Drain() { s.draining.Store(true) }

// Draining reports whether Drain was called.
func (s *Service) Draining() bool { return s.draining.Load() }

// Readiness says whether this instance should get traffic, and if not, why: not once it is
// draining, not before the first status poll, not while the store is unavailable, and (with
// WithReadyRequiresFresh) not while the data is stale. Stale answers are better than none,
// so by default staleness alone keeps an instance ready.
func (s *Service) Readiness() (ready bool, reason string) {
	st, polled := s.Status()
	switch {
	case s.Draining():
		return false, "shutting down"
	case !polled:
		return false, "the store's status has not been polled yet"
	case !st.Available:
		return false, "the Big Segment store is unavailable"
	case s.readyRequiresFresh && st.Stale:
		return false, "the Big Segment data is stale"
	}
	return true, ""
}

func (s *Service) logChange(st StoreStatus, err error) {
	attrs := []any{"available", st.Available, "stale", st.Stale}
	if !st.LastSynchronized.IsZero() {
		attrs = append(attrs, "lastSynchronized", st.LastSynchronized.UTC().Format(time.RFC3339Nano))
	}
	switch {
	case err != nil:
		s.log.Error("big segment store unavailable", append(attrs, "err", err.Error())...)
	case st.Stale:
		s.log.Warn("big segment data is stale", attrs...)
	default:
		s.log.Info("big segment store healthy", attrs...)
	}
}

// Run polls the store's status at once and then every poll interval (more often while the
// store is unreachable), and keeps the store readers of lookups ready, until ctx ends. It
// returns nil once ctx has ended and every goroutine it kept has finished; run it once per
// Service.
func (s *Service) Run(ctx context.Context) error {
	stopReaders := s.reads.keepReaders()
	defer stopReaders()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			next := s.pollInterval
			if st := s.Poll(ctx); st.Unreachable {
				next = min(next, recoveryPollInterval)
			}
			timer.Reset(next)
		}
	}
}
