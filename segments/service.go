package segments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"
)

// Defaults: the cache TTL, poll interval and staleness threshold are the SDKs'; the cache is
// larger than an SDK's 1000, as suits a service shared by many callers.
const (
	DefaultCacheSize     = 100_000
	DefaultCacheTTL      = 5 * time.Second
	DefaultCursorTTL     = time.Hour
	DefaultPollInterval  = 5 * time.Second
	DefaultStaleAfter    = 2 * time.Minute
	DefaultLookupTimeout = time.Second
	DefaultReadsInFlight = 4
)

// Service holds every environment served, their poll loop (Run), their readiness and the
// channel of their changes.
type Service struct {
	envs []*Environment
	read func(ctx context.Context) []MetadataRead // every environment's metadata, in order

	cacheSize, readsInFlight                                     int
	cacheTTL, cursorTTL, pollInterval, staleAfter, lookupTimeout time.Duration
	timeout                                                      error // the cause of a lookup's end at lookupTimeout, made once
	readyRequiresFresh                                           bool
	now                                                          func() time.Time
	log                                                          *slog.Logger
	errorCode                                                    func(error) string // nil for none
	observer                                                     func(*Environment) Observer
	tracer                                                       trace.Tracer // nil: no spans

	polling  chan struct{}                 // held (one in it) by the poll running: one at a time
	changes  atomic.Pointer[chan struct{}] // closed, and replaced, by a poll that changes something
	draining atomic.Bool
}

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

// state is what an Environment shares with its lookups and polls.
type state struct {
	mu         sync.RWMutex // guards status, cache, logged, unsaid and inventory
	status     *StoreStatus // nil before the first poll
	cache      cache
	logged     time.Time          // when a failed read was last logged
	unsaid     int                // failed reads since then
	flight     singleflight.Group // one read of a hash a generation, shared by its lookups
	slots      chan struct{}      // the semaphore of store reads in flight
	batchSlots chan struct{}      // batches' share of them: at most half, so that single lookups always have some
	inventory  Inventory          // the last scan's, as SetInventory records it
}

// ValidateName says why name cannot be an environment's (it is part of paths), or nil. (A
// regexp of the rule would keep 50 KB of heap for good.)
func ValidateName(name string) error {
	ok := len(name) > 0 && len(name) <= 63 && name[0] != '-' && name[0] != '_'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
	}
	if !ok {
		return errors.New("a name is lower-case letters, digits, - and _, starting with a letter or digit, at most 63 characters (it is part of paths)")
	}
	return nil
}

// Option configures a Service.
type Option func(*Service)

// WithCache sets the cache's entry bound, shared by the environments, and the TTL of answers
// read while the store has no cursor; either at zero turns the cache off.
func WithCache(size int, ttl time.Duration) Option {
	return func(s *Service) { s.cacheSize, s.cacheTTL = size, ttl }
}

// WithCursorTTL sets how long an answer is cached while the store has a cursor: how long a
// change made by hand, without a new cursor, can go unseen.
func WithCursorTTL(d time.Duration) Option { return func(s *Service) { s.cursorTTL = d } }

// WithPollInterval sets how often Run polls; it is capped at the staleness threshold.
func WithPollInterval(d time.Duration) Option { return func(s *Service) { s.pollInterval = d } }

// WithStaleAfter sets how old the last synchronization may be before the data is stale.
func WithStaleAfter(d time.Duration) Option { return func(s *Service) { s.staleAfter = d } }

// WithLookupTimeout bounds how long a lookup, batch or poll waits for the store; zero: no bound.
func WithLookupTimeout(d time.Duration) Option { return func(s *Service) { s.lookupTimeout = d } }

// WithReadsInFlight bounds an environment's store reads at once; batches take at most half of
// them (at least one).
func WithReadsInFlight(n int) Option { return func(s *Service) { s.readsInFlight = n } }

// WithReadyRequiresFresh makes Readiness false while data is stale, not only unavailable.
func WithReadyRequiresFresh(b bool) Option { return func(s *Service) { s.readyRequiresFresh = b } }

// WithMetadataRead sets how a poll reads every environment's metadata at once (one round trip
// on a database that holds them all), in order; by default each store's is read in turn.
func WithMetadataRead(read func(ctx context.Context) []MetadataRead) Option {
	return func(s *Service) { s.read = read }
}

// WithClock replaces time.Now for staleness, cache expiry, log spacing and status times.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithLogger sets where status changes and failed reads are logged. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithErrorCode adds code(err), a bounded name of a store error (an AWS error code), to the
// log lines of failed reads and of the store becoming unavailable, for searching by cause.
func WithErrorCode(code func(error) string) Option { return func(s *Service) { s.errorCode = code } }

// WithObserver sets who is told of each environment's lookups, reads and polls (metrics).
func WithObserver(of func(*Environment) Observer) Option { return func(s *Service) { s.observer = of } }

// New returns the Service of envs: at least one, each with a store and a name of its own. It
// starts nothing: Run does.
func New(envs []Environment, opts ...Option) (*Service, error) {
	s := &Service{cacheSize: DefaultCacheSize, cacheTTL: DefaultCacheTTL, cursorTTL: DefaultCursorTTL,
		pollInterval: DefaultPollInterval, staleAfter: DefaultStaleAfter, lookupTimeout: DefaultLookupTimeout,
		readsInFlight: DefaultReadsInFlight, now: time.Now, log: slog.New(slog.DiscardHandler),
		observer: func(*Environment) Observer { return nopObserver{} }, polling: make(chan struct{}, 1)}
	for _, o := range opts {
		o(s)
	}
	if s.staleAfter <= 0 {
		s.staleAfter = DefaultStaleAfter
	}
	if s.pollInterval <= 0 {
		s.pollInterval = DefaultPollInterval
	}
	s.pollInterval, s.readsInFlight = min(s.pollInterval, s.staleAfter), max(s.readsInFlight, 1)
	// A deadline exceeded, so that logs and metrics give it that code.
	s.timeout = fmt.Errorf("no answer within %v: %w", s.lookupTimeout, context.DeadlineExceeded)
	s.changes.Store(new(make(chan struct{})))
	if s.read == nil {
		s.read = s.readEach
	}
	if len(envs) == 0 {
		return nil, errors.New("no environment to serve")
	}
	seen := map[string]bool{}
	for _, in := range envs {
		switch err := ValidateName(in.Name); {
		case err != nil:
			return nil, fmt.Errorf("environment %q: %w", in.Name, err)
		case seen[in.Name]:
			return nil, fmt.Errorf("environment %q is given twice", in.Name)
		case in.Store == nil:
			return nil, fmt.Errorf("environment %q has no store", in.Name)
		}
		seen[in.Name] = true
		e := &Environment{Name: in.Name, Prefix: in.Prefix, Store: in.Store, svc: s, log: s.log, state: &state{
			slots: make(chan struct{}, s.readsInFlight), batchSlots: make(chan struct{}, max(s.readsInFlight/2, 1))}}
		if s.cacheTTL > 0 && s.cacheSize > 0 {
			e.cache = newCache(max(s.cacheSize/len(envs), 2))
		}
		if len(envs) > 1 {
			e.log = s.log.With("environment", e.Name)
		}
		e.obs = s.observer(e)
		s.envs = append(s.envs, e)
	}
	return s, nil
}

// Environments are the environments served, in the order given to New.
func (s *Service) Environments() []*Environment { return s.envs }

// StaleAfter is the staleness threshold.
func (s *Service) StaleAfter() time.Duration { return s.staleAfter }

// CacheLen is how many entries the environment's cache holds.
func (e *Environment) CacheLen() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.cache.young == nil {
		return 0
	}
	return e.cache.young.ItemCount() + e.cache.old.ItemCount()
}

// Changes returns a channel closed by the next poll that changes an environment's Available,
// Stale or data: take it, read the statuses, wait, and take it again. A subscriber never holds
// up the loop and, however slow, ends up with the latest.
func (s *Service) Changes() <-chan struct{} { return *s.changes.Load() }

// Drain marks the service as shutting down: Readiness is false from now on, so that load
// balancers stop sending traffic, which is still answered meanwhile.
func (s *Service) Drain() { s.draining.Store(true) }

// Draining reports whether Drain was called.
func (s *Service) Draining() bool { return s.draining.Load() }

// Readiness says whether this instance should get traffic, and if not why, naming each
// environment that keeps it from it when there are several.
func (s *Service) Readiness() (ready bool, reason string) {
	if s.Draining() {
		return false, "shutting down"
	}
	var not []string
	for _, e := range s.envs {
		st, polled := e.Status()
		why := "the store's status has not been polled yet"
		switch {
		case polled && !st.Available:
			why = "the Big Segment store is unavailable"
		case polled && s.readyRequiresFresh && st.Stale:
			why = "the Big Segment data is stale"
		case polled:
			continue
		}
		if len(s.envs) == 1 {
			return false, why
		}
		not = append(not, e.Name+": "+why)
	}
	return len(not) == 0, strings.Join(not, "; ")
}
