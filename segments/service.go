package segments

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults: the SDKs' TTL, poll interval and staleness; a cache larger than their 1000 entries.
const (
	DefaultCacheSize     = 100_000
	DefaultCacheTTL      = 5 * time.Second
	DefaultPollInterval  = 5 * time.Second
	DefaultStaleAfter    = 2 * time.Minute
	DefaultLookupTimeout = time.Second
	DefaultReadsInFlight = 4
	recoveryPollInterval = time.Second // how often Run polls while a store is unreachable, if sooner
)

// Service holds every environment served, their poll loop (Run), readiness and changes.
type Service struct {
	envs                                              []*Environment
	read                                              func(ctx context.Context) []MetadataRead // every environment's metadata, in order
	cacheSize, readsInFlight                          int
	cacheTTL, pollInterval, staleAfter, lookupTimeout time.Duration
	timeout                                           error // the cause of a lookup's end at lookupTimeout: a deadline exceeded
	readyRequiresFresh                                bool
	now                                               func() time.Time
	log                                               *slog.Logger
	errorCode                                         func(error) string // nil for none
	observer                                          func(*Environment) Observer

	polling  chan struct{}                 // the poll lock (one in it): one poll at a time
	changes  atomic.Pointer[chan struct{}] // closed, and replaced, by a poll that changes something
	draining atomic.Bool
}

// Option configures a Service.
type Option func(*Service)

// WithCache sets the cache's entry bound, shared by the environments, and the TTL of answers
// read while the store has no cursor; either at zero turns the cache off.
func WithCache(size int, ttl time.Duration) Option {
	return func(s *Service) { s.cacheSize, s.cacheTTL = size, ttl }
}

// WithPollInterval sets how often Run polls; it is capped at the staleness threshold.
func WithPollInterval(d time.Duration) Option { return func(s *Service) { s.pollInterval = d } }

// WithStaleAfter sets how old the last synchronization may be before the data is stale.
func WithStaleAfter(d time.Duration) Option { return func(s *Service) { s.staleAfter = d } }

// WithLookupTimeout bounds how long a lookup, batch or poll waits for the store; zero: no bound.
func WithLookupTimeout(d time.Duration) Option { return func(s *Service) { s.lookupTimeout = d } }

// WithReadsInFlight bounds an environment's store reads at once; batches take at most half.
func WithReadsInFlight(n int) Option { return func(s *Service) { s.readsInFlight = n } }

// WithReadyRequiresFresh makes Readiness false while data is stale, not only unavailable.
func WithReadyRequiresFresh(b bool) Option { return func(s *Service) { s.readyRequiresFresh = b } }

// WithMetadataRead sets how a poll reads every environment's metadata, in order, at once (one
// round trip to a database that holds them all); by default each store's is read in turn.
func WithMetadataRead(read func(ctx context.Context) []MetadataRead) Option {
	return func(s *Service) { s.read = read }
}

// WithClock replaces time.Now for staleness, cache expiry, log spacing and status times.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithLogger sets where status changes and failed reads are logged. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithErrorCode adds code(err), a bounded name of a store error (an AWS error code), to the
// log lines of store errors, for searching by cause.
func WithErrorCode(code func(error) string) Option { return func(s *Service) { s.errorCode = code } }

// WithObserver sets who is told of each environment's lookups, reads and polls (metrics).
func WithObserver(of func(*Environment) Observer) Option { return func(s *Service) { s.observer = of } }

// New returns the Service of envs, each with a store and a name of its own. It starts nothing.
func New(envs []Environment, opts ...Option) (*Service, error) {
	s := &Service{cacheSize: DefaultCacheSize, cacheTTL: DefaultCacheTTL, pollInterval: DefaultPollInterval,
		staleAfter: DefaultStaleAfter, lookupTimeout: DefaultLookupTimeout, readsInFlight: DefaultReadsInFlight,
		now: time.Now, log: slog.New(slog.DiscardHandler), polling: make(chan struct{}, 1),
		observer: func(*Environment) Observer { return nopObserver{} }}
	for _, o := range opts {
		o(s)
	}
	s.staleAfter = cmp.Or(max(s.staleAfter, 0), DefaultStaleAfter)
	s.pollInterval = min(cmp.Or(max(s.pollInterval, 0), DefaultPollInterval), s.staleAfter)
	if s.readsInFlight = max(s.readsInFlight, 1); s.read == nil {
		s.read = s.readEach
	}
	s.timeout = fmt.Errorf("no answer within %v: %w", s.lookupTimeout, context.DeadlineExceeded)
	s.changes.Store(new(make(chan struct{})))
	if len(envs) == 0 {
		return nil, errors.New("no environment to serve")
	}
	for i, in := range envs {
		switch err := ValidateName(in.Name); {
		case err != nil:
			return nil, fmt.Errorf("environment %q: %w", in.Name, err)
		case slices.ContainsFunc(envs[:i], func(o Environment) bool { return o.Name == in.Name }):
			return nil, fmt.Errorf("environment %q is given twice", in.Name)
		case in.Store == nil:
			return nil, fmt.Errorf("environment %q has no store", in.Name)
		}
		e := &Environment{Name: in.Name, Prefix: in.Prefix, Store: in.Store, svc: s, log: s.log, state: &state{
			slots: make(chan struct{}, s.readsInFlight), batchSlots: make(chan struct{}, max(s.readsInFlight/2, 1))}}
		if s.cacheTTL > 0 && s.cacheSize > 0 {
			e.half, e.young, e.old = max(s.cacheSize/len(envs)/2, 1), newGoCache(), newGoCache()
		}
		if len(envs) > 1 {
			e.log = s.log.With("environment", e.Name)
		}
		e.obs = s.observer(e)
		s.envs = append(s.envs, e)
	}
	return s, nil
}

// ValidateName says why name cannot be an environment's, or nil. (A regexp would keep 50 KB.)
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

// Environments are the environments served, in the order given to New.
func (s *Service) Environments() []*Environment { return s.envs }

// StaleAfter is the staleness threshold.
func (s *Service) StaleAfter() time.Duration { return s.staleAfter }

// Changes returns a channel closed by the next poll that changes an environment's Available,
// Stale or data: take it, read the statuses, wait, take it again; however slow, a subscriber
// ends up with the latest, and never holds up the loop.
func (s *Service) Changes() <-chan struct{} { return *s.changes.Load() }

// Drain makes Readiness false from now on, so that load balancers stop sending traffic.
func (s *Service) Drain() { s.draining.Store(true) }

// Draining reports whether Drain was called.
func (s *Service) Draining() bool { return s.draining.Load() }

// Readiness says whether this instance should get traffic, and if not why.
func (s *Service) Readiness() (ready bool, reason string) {
	if s.Draining() {
		return false, "shutting down"
	}
	var not []string
	for _, e := range s.envs {
		why := "the store's status has not been polled yet"
		switch st, polled := e.Status(); {
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

func (s *Service) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.lookupTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, s.lookupTimeout, s.timeout)
}

func (s *Service) errAttrs(err error) []any {
	if s.errorCode == nil {
		return []any{"err", err.Error()}
	}
	return []any{"code", s.errorCode(err), "err", err.Error()}
}

// Store operations, as passed to Observer.StoreRead.
const (
	OpMemberships = "memberships"
	OpMetadata    = "metadata"
)

// Observer is told what an environment does, for metrics, on hot paths: it must be fast.
type Observer interface {
	// Lookup is called once per context looked up.
	Lookup(status LookupStatus, cached bool)
	// StoreRead is called after every store read; for metadata, once a poll (one read for
	// all), on the first environment's Observer, with no error (StatusPolled has each's).
	StoreRead(op string, d time.Duration, err error)
	// StatusPolled is called after every poll; changed: Available or Stale changed.
	StatusPolled(st StoreStatus, err error, changed bool)
	// DataChanged is called when a poll finds a new cursor: the cache was just dropped.
	DataChanged()
}

type nopObserver struct{}

func (nopObserver) Lookup(LookupStatus, bool)              {}
func (nopObserver) StoreRead(string, time.Duration, error) {}
func (nopObserver) StatusPolled(StoreStatus, error, bool)  {}
func (nopObserver) DataChanged()                           {}

// LookupStatus says how far a lookup's answer can be trusted, as the SDKs' BigSegmentsStatus.
type LookupStatus string

// Lookup statuses, in order of precedence.
const (
	Healthy    LookupStatus = "HEALTHY"     // read from a store that is available and up to date
	Stale      LookupStatus = "STALE"       // the data was not synchronized within staleAfter (or ever)
	StoreError LookupStatus = "STORE_ERROR" // the read failed, or the last poll could not read the store
)

// StoreStatus is an environment's status after a poll.
type StoreStatus struct {
	Available        bool      // the poll read the metadata
	Unreachable      bool      // the poll could not reach the store (not ErrInvalidMetadata): lookups fail at once
	Stale            bool      // never synchronized, or last synchronized staleAfter or more before the poll
	LastSynchronized time.Time // the last synchronization time known, zero if none
	Cursor           string    // the last cursor known, "" if none
	DataChangedAt    time.Time // when a poll first saw the data as it is; zero without a cursor
	CheckedAt        time.Time // when the poll ran
	LastError        string    // while unavailable: why, as the logs say it ("" while available)
	LastErrorAt      time.Time // when the poll that first failed so ran
}

// LookupStatus is the status of a lookup whose own read succeeded under this store status.
func (s StoreStatus) LookupStatus() LookupStatus {
	switch {
	case !s.Available:
		return StoreError
	case s.Stale:
		return Stale
	}
	return Healthy
}

// Status returns the environment's last polled status, and false before the first poll.
func (e *Environment) Status() (StoreStatus, bool) {
	st, _ := e.snapshot()
	return *cmp.Or(st, &StoreStatus{Stale: true}), st != nil
}

func (e *Environment) snapshot() (*StoreStatus, uint64) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.status, e.gen
}

// firstStatus is snapshot's, after a poll within ctx if none has finished yet.
func (e *Environment) firstStatus(ctx context.Context) (*StoreStatus, uint64) {
	st, gen := e.snapshot()
	if st == nil {
		e.svc.poll(ctx, func() bool { st, _ := e.snapshot(); return st == nil })
		if st, gen = e.snapshot(); st == nil {
			st = &StoreStatus{Stale: true, CheckedAt: e.svc.now()}
		}
	}
	return st, gen
}

// Poll polls every environment now, after the poll running (if any), which may predate a change.
func (s *Service) Poll(ctx context.Context) { s.poll(ctx, func() bool { return true }) }

// poll takes the poll lock within ctx and polls if still needed. A poll whose caller has gone
// records nothing: that is no failure of the store.
func (s *Service) poll(ctx context.Context, needed func() bool) {
	select {
	case s.polling <- struct{}{}:
		defer func() { <-s.polling }()
	case <-ctx.Done():
		return
	}
	if !needed() {
		return
	}
	readCtx, cancel := s.withTimeout(ctx)
	defer cancel()
	start, reads := time.Now(), []MetadataRead(nil)
	panicked := safely(func() { reads = s.read(readCtx) })
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return
	}
	s.envs[0].obs.StoreRead(OpMetadata, time.Since(start), nil) // one read for all: its failures are each environment's StatusPolled
	changed := false
	for i, e := range s.envs {
		r := MetadataRead{Err: cmp.Or(panicked, errors.New("read metadata: no answer for the store"))}
		if i < len(reads) { // not after a panic, or an answer for fewer environments
			r = reads[i]
		}
		changed = e.record(r.Metadata, r.Err) || changed
	}
	if changed {
		close(*s.changes.Swap(new(make(chan struct{}))))
	}
}

func (s *Service) readEach(ctx context.Context) []MetadataRead {
	reads := make([]MetadataRead, len(s.envs))
	for i, e := range s.envs {
		if err := safely(func() { reads[i].Metadata, reads[i].Err = e.Store.Metadata(ctx) }); err != nil {
			reads[i].Err = err
		}
	}
	return reads
}

// record publishes the status after a poll, and says whether Available, Stale or the data changed.
func (e *Environment) record(md Metadata, err error) bool {
	now := e.svc.now()
	e.mu.Lock()
	prev := e.status
	st := *cmp.Or(prev, &StoreStatus{})
	st.Available, st.Unreachable, st.CheckedAt = err == nil, err != nil && !errors.Is(err, ErrInvalidMetadata), now
	dataChanged := err == nil && prev != nil && md.Cursor != prev.Cursor
	switch {
	case err != nil && (prev == nil || prev.Available || prev.LastError != err.Error()):
		st.LastError, st.LastErrorAt = err.Error(), now
	case err == nil:
		st.LastError, st.LastErrorAt, st.LastSynchronized = "", time.Time{}, md.LastSynchronized
		if prev == nil || dataChanged {
			st.Cursor, st.DataChangedAt = md.Cursor, now
		}
		if st.Cursor == "" {
			st.DataChangedAt = time.Time{}
		}
	}
	// The SDKs' rule; a synchronization time in the future (clock skew) is not stale.
	st.Stale = st.LastSynchronized.IsZero() || now.Sub(st.LastSynchronized) >= e.svc.staleAfter
	if e.status = &st; dataChanged { // a new generation, with an empty pair: nothing cached before is served
		if e.gen++; e.young != nil {
			e.young, e.old = newGoCache(), newGoCache()
		}
	}
	e.mu.Unlock()
	changed := prev == nil || prev.Available != st.Available || prev.Stale != st.Stale
	if e.obs.StatusPolled(st, err, changed); dataChanged {
		e.obs.DataChanged()
		e.log.Debug("big segment data changed", "cursor", st.Cursor)
	}
	if changed {
		attrs := []any{"available", st.Available, "stale", st.Stale}
		if !st.LastSynchronized.IsZero() {
			attrs = append(attrs, "lastSynchronized", st.LastSynchronized.UTC().Format(time.RFC3339Nano))
		}
		switch {
		case err != nil:
			e.log.Error("big segment store unavailable", append(attrs, e.svc.errAttrs(err)...)...)
		case st.Stale:
			e.log.Warn("big segment data is stale", attrs...)
		default:
			e.log.Info("big segment store healthy", attrs...)
		}
	}
	return changed || dataChanged
}

// Run polls at once, then every poll interval (every second while a store is unreachable).
func (s *Service) Run(ctx context.Context) error {
	for timer := time.NewTimer(0); ; {
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
			s.Poll(ctx)
			next := s.pollInterval
			for _, e := range s.envs {
				if st, _ := e.Status(); st.Unreachable {
					next = min(next, recoveryPollInterval)
				}
			}
			timer.Reset(next)
		}
	}
}
