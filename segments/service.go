package segments

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults. The cache TTL, poll interval and staleness threshold are the LaunchDarkly SDKs';
// the cache size is larger than an SDK's 1000, as suits a service shared by many callers; the
// cursor TTL, lookup timeout and reads in flight have no SDK counterpart.
const (
	DefaultCacheSize     = 100_000
	DefaultCacheTTL      = 5 * time.Second
	DefaultCursorTTL     = time.Hour
	DefaultPollInterval  = 5 * time.Second
	DefaultStaleAfter    = 2 * time.Minute
	DefaultLookupTimeout = time.Second
	DefaultReadsInFlight = 4
)

// Service answers which Big Segments a context is in, by context hash (see Hash): it serves
// recent answers from a bounded cache, reads the store on misses (one read for concurrent
// misses of the same context, one store call for misses that queue behind the reads in
// flight), and keeps the store's status up to date while Run runs. The package documentation
// has the design; lookup.go has the lookups, coalesce.go the shared reads, cache.go the cache
// and status.go the status.
type Service struct {
	store         Store
	cache         *cache
	cacheTTL      time.Duration // how long an answer is cached while the store has no cursor
	cursorTTL     time.Duration // ... and while it has one: a new cursor drops it anyway
	pollInterval  time.Duration
	staleAfter    time.Duration
	lookupTimeout time.Duration
	timeoutCause  error // errLookupTimeout{lookupTimeout}, made once
	now           func() time.Time
	log           *slog.Logger
	errorCode     func(error) string // a store error's bounded code, for logs; nil for none
	obs           Observer

	readsInFlight int
	reads         *coalescer         // single lookups' store reads
	slots         chan struct{}      // store reads in flight, of single lookups and batches alike
	readErrs      errorLog           // failed reads, logged at most once per interval
	polls         singleflight.Group // one key: inline polls of lookups before any poll finished
	pollLock      chan struct{}      // one poll at a time, so that each status follows the one before
	status        atomic.Pointer[StoreStatus]

	subsMu sync.Mutex
	subs   map[*subscription]struct{}

	readyRequiresFresh bool
	draining           atomic.Bool
}

// Option configures a Service.
type Option func(*Service)

// WithCache sets the membership cache's entry bound and the TTL of answers read while the
// store has no cursor (WithCursorTTL sets the other). Either at zero or below turns the cache
// off. Defaults: DefaultCacheSize, DefaultCacheTTL.
func WithCache(size int, ttl time.Duration) Option {
	return func(s *Service) {
		s.cacheTTL, s.cache = ttl, nil
		if ttl > 0 {
			s.cache = newCache(size, nil)
		}
	}
}

// WithCursorTTL sets how long an answer is cached while the store has a cursor: every cached
// answer is dropped when the cursor changes, so it only bounds how long a change made without
// one (by hand) can go unseen. Default DefaultCursorTTL.
func WithCursorTTL(d time.Duration) Option {
	return func(s *Service) { s.cursorTTL = d }
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

// WithLookupTimeout bounds how long a lookup (or batch, or status poll) may wait for the
// store: past it, the lookup answers StoreError. Zero means no bound of the service's own.
// Default DefaultLookupTimeout.
func WithLookupTimeout(d time.Duration) Option {
	return func(s *Service) { s.lookupTimeout = d }
}

// WithReadsInFlight bounds how many store reads run at once, for single lookups and batches
// alike; misses of single lookups that arrive while all are busy are read together, in one
// store call. Default DefaultReadsInFlight.
func WithReadsInFlight(n int) Option {
	return func(s *Service) { s.readsInFlight = n }
}

// WithReadyRequiresFresh makes Readiness false while the data is stale, not only while the
// store is unavailable.
func WithReadyRequiresFresh(b bool) Option {
	return func(s *Service) { s.readyRequiresFresh = b }
}

// WithClock replaces time.Now for staleness, cache expiry, the spacing of read-failure logs
// and the times in StoreStatus, so tests can move time.
func WithClock(now func() time.Time) Option {
	return func(s *Service) { s.now = now }
}

// WithLogger sets where status changes and failed reads are logged. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(s *Service) { s.log = l }
}

// WithErrorCode names each store error in the logs of failed reads and of the store
// becoming unavailable with code(err), as "code": a bounded name the store gives its errors
// (such as an AWS error code), for searching logs by cause. Default: no code.
func WithErrorCode(code func(error) string) Option {
	return func(s *Service) { s.errorCode = code }
}

// WithObserver sets who is told about lookups, reads and polls (metrics). Default: no one.
func WithObserver(o Observer) Option {
	return func(s *Service) { s.obs = o }
}

// New returns a Service reading store. It starts nothing: call Run to poll the store's status
// and keep store readers ready.
func New(store Store, opts ...Option) *Service {
	s := &Service{
		store:         store,
		cache:         newCache(DefaultCacheSize, nil),
		cacheTTL:      DefaultCacheTTL,
		cursorTTL:     DefaultCursorTTL,
		pollInterval:  DefaultPollInterval,
		staleAfter:    DefaultStaleAfter,
		lookupTimeout: DefaultLookupTimeout,
		readsInFlight: DefaultReadsInFlight,
		now:           time.Now,
		log:           slog.New(slog.DiscardHandler),
		obs:           nopObserver{},
		subs:          make(map[*subscription]struct{}),
		pollLock:      make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(s)
	}
	s.timeoutCause = errLookupTimeout{s.lookupTimeout}
	s.readsInFlight = max(s.readsInFlight, 1)
	s.slots = make(chan struct{}, s.readsInFlight)
	s.reads = newCoalescer(s.readDetached, s.readsInFlight, maxReadBatch)
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

// CacheLen is the number of entries the cache holds, at most its bound: an expired entry counts
// until its generation of the cache is dropped, and an entry copied from the old generation
// into the young one counts in both.
func (s *Service) CacheLen() int { return s.cache.len() }

// cacheFor is how long an answer read under st is cached.
func (s *Service) cacheFor(st StoreStatus) time.Duration {
	if st.Cursor != "" {
		return s.cursorTTL
	}
	return s.cacheTTL
}
