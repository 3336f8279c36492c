package segments

import (
	"context"
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
	DefaultCacheSize    = 100_000
	DefaultCacheTTL     = 5 * time.Second
	DefaultPollInterval = 5 * time.Second
	DefaultStaleAfter   = 2 * time.Minute
)

// Service answers which Big Segments a context is in: it hashes keys, serves recent answers
// from a bounded cache, reads the store on misses (one read for concurrent misses of the same
// context), and keeps the store's status up to date while Run runs.
type Service struct {
	store        Store
	cache        *cache
	pollInterval time.Duration
	staleAfter   time.Duration
	now          func() time.Time
	log          *slog.Logger
	obs          Observer

	reads *coalescer
	polls singleflight.Group // one key: inline polls before the first scheduled one

	maxReadsInFlight, maxReadBatch int
	status                         atomic.Pointer[StoreStatus]

	mu   sync.Mutex // guards subs
	subs map[*subscription]struct{}

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

// WithClock replaces time.Now for staleness and cache expiry, so tests can move time.
func WithClock(now func() time.Time) Option {
	return func(s *Service) { s.now = now }
}

// WithLogger sets where status changes are logged. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(s *Service) { s.log = l }
}

// WithObserver sets who is told about lookups, reads and polls (metrics).
func WithObserver(o Observer) Option {
	return func(s *Service) { s.obs = o }
}

// WithCoalescing bounds how many membership reads for single lookups run at once, and how
// many cache misses one of them may carry (misses that arrive while all are busy are read
// together, in one store call). Defaults: DefaultMaxReadsInFlight, DefaultMaxReadBatch.
func WithCoalescing(maxInFlight, maxBatch int) Option {
	return func(s *Service) { s.maxReadsInFlight, s.maxReadBatch = maxInFlight, maxBatch }
}

// New returns a Service reading store. It starts nothing: call Run to poll the store's status.
func New(store Store, opts ...Option) *Service {
	s := &Service{
		store:        store,
		cache:        newCache(DefaultCacheSize, DefaultCacheTTL, nil),
		pollInterval: DefaultPollInterval,
		staleAfter:   DefaultStaleAfter,
		now:          time.Now,
		log:          slog.New(slog.DiscardHandler),
		obs:          nopObserver{},
		subs:         make(map[*subscription]struct{}),

		maxReadsInFlight: DefaultMaxReadsInFlight,
		maxReadBatch:     DefaultMaxReadBatch,
	}
	for _, o := range opts {
		o(s)
	}
	s.reads = newCoalescer(s.readStore, s.maxReadsInFlight, s.maxReadBatch)
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

// CacheLen is the number of cached memberships, including expired ones not yet purged.
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
	return s.lookup(ctx, false, contextKey)
}

// LookupHash answers for the context with the given hash; see ValidateHash.
func (s *Service) LookupHash(ctx context.Context, hash string) Result {
	return s.lookup(ctx, true, hash)
}

func (s *Service) lookup(ctx context.Context, byHash bool, k string) Result {
	st := s.currentStatus(ctx)
	if m, hash, ok := s.cache.get(byHash, k); ok {
		status := st.LookupStatus()
		s.obs.Lookup(status, true)
		return Result{ContextHash: hash, Membership: m, Status: status, Cached: true}
	}
	hash := s.hashOf(byHash, k)
	m, err := s.readShared(ctx, hash)
	if err != nil {
		s.obs.Lookup(StoreError, false)
		return Result{ContextHash: hash, Status: StoreError, Err: err}
	}
	s.cache.set(byHash, k, hash, m)
	status := st.LookupStatus()
	s.obs.Lookup(status, false)
	return Result{ContextHash: hash, Membership: m, Status: status}
}

func (s *Service) hashOf(byHash bool, k string) string {
	if byHash {
		return k
	}
	return Hash(k)
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
		return Membership{}, fmt.Errorf("read membership: %w", context.Cause(ctx))
	}
}

// readStore reads memberships from the store, timing the read for the observer. A store
// that panics or answers for the wrong number of contexts fails this read, not the process.
func (s *Service) readStore(ctx context.Context, hashes []string) (reads []Read) {
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			reads = make([]Read, len(hashes))
			for i := range reads {
				reads[i].Err = fmt.Errorf("read membership: store panicked: %v", v)
			}
			s.obs.StoreRead(OpMemberships, time.Since(start), reads[0].Err)
		}
	}()
	reads = s.store.Memberships(ctx, hashes)
	if len(reads) != len(hashes) {
		panic(fmt.Sprintf("store returned %d reads for %d contexts", len(reads), len(hashes)))
	}
	var err error
	for _, r := range reads {
		if r.Err != nil {
			err = r.Err
			break
		}
	}
	s.obs.StoreRead(OpMemberships, time.Since(start), err)
	for i := range reads {
		if reads[i].Err != nil {
			reads[i].Err = fmt.Errorf("read membership: %w", reads[i].Err)
		}
	}
	return reads
}

// Query names one context of a batch: by Key, or by Hash when Key is empty.
type Query struct {
	Key  string
	Hash string
}

// LookupBatch answers for many contexts at once, in order. Every cache miss of the batch is
// read from the store in one call (one pipelined round trip on Redis); a context asked for
// twice is read once.
func (s *Service) LookupBatch(ctx context.Context, queries []Query) []Result {
	st := s.currentStatus(ctx)
	status := st.LookupStatus()
	results := make([]Result, len(queries))
	var misses []int
	missing := make(map[string]int) // hash -> index into hashes
	var hashes []string
	for i, q := range queries {
		byHash, k := q.Key == "", q.Key
		if byHash {
			k = q.Hash
		}
		if m, hash, ok := s.cache.get(byHash, k); ok {
			results[i] = Result{ContextHash: hash, Membership: m, Status: status, Cached: true}
			s.obs.Lookup(status, true)
			continue
		}
		hash := s.hashOf(byHash, k)
		results[i].ContextHash = hash
		misses = append(misses, i)
		if _, ok := missing[hash]; !ok {
			missing[hash] = len(hashes)
			hashes = append(hashes, hash)
		}
	}
	if len(hashes) == 0 {
		return results
	}
	reads := s.readStore(ctx, hashes)
	for _, i := range misses {
		r := reads[missing[results[i].ContextHash]]
		if r.Err != nil {
			results[i].Status, results[i].Err = StoreError, r.Err
			s.obs.Lookup(StoreError, false)
			continue
		}
		if q := queries[i]; q.Key != "" {
			s.cache.set(false, q.Key, results[i].ContextHash, r.Membership)
		} else {
			s.cache.set(true, q.Hash, q.Hash, r.Membership)
		}
		results[i].Membership, results[i].Status = r.Membership, status
		s.obs.Lookup(status, false)
	}
	return results
}

// Status returns the last polled store status, and false if no poll has completed yet.
// It never reads the store.
func (s *Service) Status() (StoreStatus, bool) {
	if st := s.status.Load(); st != nil {
		return *st, true
	}
	return StoreStatus{}, false
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
		return StoreStatus{CheckedAt: s.now()}
	}
}

// Poll reads the store's metadata now, records the resulting status, tells subscribers if
// Available or Stale changed, and returns it. Run calls it on schedule.
func (s *Service) Poll(ctx context.Context) StoreStatus {
	start := time.Now()
	md, err := s.store.Metadata(ctx)
	s.obs.StoreRead(OpMetadata, time.Since(start), err)

	s.mu.Lock() // serialises polls, so that "changed" compares consecutive statuses
	defer s.mu.Unlock()
	prev := s.status.Load()
	now := s.now()
	st := StoreStatus{CheckedAt: now}
	if err == nil {
		st.Available = true
		st.LastSynchronized = md.LastSynchronized
	} else if prev != nil {
		st.LastSynchronized = prev.LastSynchronized
	}
	st.Stale = isStale(st.LastSynchronized, now, s.staleAfter)
	s.status.Store(&st)

	changed := prev == nil || prev.Available != st.Available || prev.Stale != st.Stale
	s.obs.StatusPolled(st, err, changed)
	if changed {
		s.logChange(st, err)
		for sub := range s.subs {
			sub.offer(st)
		}
	}
	return st
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

// Run polls the store's status at once and then every poll interval, purges expired cache
// entries, and keeps the store readers of lookups ready, until ctx ends. It returns nil once
// ctx has ended and every goroutine it kept has finished; run it once per Service.
func (s *Service) Run(ctx context.Context) error {
	stopReaders := s.reads.keepReaders()
	defer stopReaders()
	s.Poll(ctx)
	poll := time.NewTicker(s.pollInterval)
	defer poll.Stop()
	var purge <-chan time.Time
	if s.cache != nil {
		t := time.NewTicker(min(max(s.cache.ttl, time.Second), time.Minute))
		defer t.Stop()
		purge = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
			s.Poll(ctx)
		case <-purge:
			s.cache.purge()
		}
	}
}
