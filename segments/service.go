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
	"unicode"
)

// Defaults of Config: the SDKs' cache TTL, poll interval and staleness threshold, and a cache
// larger than their 1000 entries, since one service answers for many SDKs.
const (
	DefaultCacheSize     = 100_000
	DefaultCacheTTL      = 5 * time.Second
	DefaultPollInterval  = 5 * time.Second
	DefaultStaleAfter    = 2 * time.Minute
	DefaultLookupTimeout = time.Second
	DefaultReadsInFlight = 4
)

// Config is how a Service serves. A field left zero takes its default; none may be negative.
type Config struct {
	CacheSize          int                                      // answers cached, shared evenly by the environments (2 each at least)
	CacheTTL           time.Duration                            // how long an answer read while the store has no cursor is cached
	NoCache            bool                                     // cache nothing: every lookup reads the store
	PollInterval       time.Duration                            // how often Run polls; at most StaleAfter
	StaleAfter         time.Duration                            // the age of the last synchronization from which data is stale
	LookupTimeout      time.Duration                            // the longest a lookup, batch or poll waits for the store
	ReadsInFlight      int                                      // an environment's store reads at once; batches take at most half (one at least)
	ReadyRequiresFresh bool                                     // Readiness is false while data is stale, not only unavailable
	ReadMetadata       func(ctx context.Context) []MetadataRead // every environment's, in order, in one round trip; nil: each store's in turn
	Now                func() time.Time                         // the clock of staleness, cache expiry and status times; nil: time.Now
	Logger             *slog.Logger                             // where status changes are logged; nil: nowhere
	ErrorCode          func(error) string                       // a bounded code of a store error (an AWS error code), logged with it
	Observer           func(*Environment) Observer              // each environment's Observer (its metrics); nil: none
}

// Service holds every environment served, their poll loop (Run), readiness and changes.
type Service struct {
	cfg     Config
	envs    []*Environment
	timeout error // the cause of a lookup's end at LookupTimeout: a deadline exceeded

	polling  chan struct{}                 // the poll lock (a slot of one): polls run one at a time
	changes  atomic.Pointer[chan struct{}] // closed, and replaced, by a poll that changes something
	draining atomic.Bool
}

// New returns the Service of envs, each with a store and a name of its own. It starts nothing.
func New(envs []Environment, cfg Config) (*Service, error) {
	if len(envs) == 0 {
		return nil, errors.New("no environment to serve")
	}
	cfg.CacheSize = cmp.Or(cfg.CacheSize, DefaultCacheSize)
	cfg.CacheTTL = cmp.Or(cfg.CacheTTL, DefaultCacheTTL)
	cfg.StaleAfter = cmp.Or(cfg.StaleAfter, DefaultStaleAfter)
	cfg.PollInterval = min(cmp.Or(cfg.PollInterval, DefaultPollInterval), cfg.StaleAfter)
	cfg.LookupTimeout = cmp.Or(cfg.LookupTimeout, DefaultLookupTimeout)
	cfg.ReadsInFlight = cmp.Or(cfg.ReadsInFlight, DefaultReadsInFlight)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if !cfg.NoCache && cfg.CacheSize < 2*len(envs) {
		return nil, fmt.Errorf("a cache of %d answers cannot be shared by %d environments: each needs 2 at least", cfg.CacheSize, len(envs))
	}
	s := &Service{cfg: cfg, polling: make(chan struct{}, 1)}
	s.timeout = fmt.Errorf("no answer within %v: %w", cfg.LookupTimeout, context.DeadlineExceeded)
	s.changes.Store(new(make(chan struct{})))
	if s.cfg.ReadMetadata == nil {
		s.cfg.ReadMetadata = s.readEach
	}
	for i, in := range envs {
		switch err := cmp.Or(ValidateName(in.Name), ValidatePrefix(in.Prefix)); {
		case err != nil:
			return nil, fmt.Errorf("environment %q: %w", in.Name, err)
		case slices.ContainsFunc(envs[:i], func(o Environment) bool { return o.Name == in.Name }):
			return nil, fmt.Errorf("environment %q is given twice", in.Name)
		case in.Store == nil:
			return nil, fmt.Errorf("environment %q has no store", in.Name)
		}
		e := &Environment{Name: in.Name, Prefix: in.Prefix, Store: in.Store, svc: s, log: cfg.Logger, obs: nopObserver{}}
		e.state = &state{young: newGoCache(), old: newGoCache(), inventory: Inventory{State: ScanNone},
			slots: make(chan struct{}, cfg.ReadsInFlight), batchSlots: make(chan struct{}, max(cfg.ReadsInFlight/2, 1))}
		if !cfg.NoCache {
			e.half = cfg.CacheSize / len(envs) / 2
		}
		if len(envs) > 1 {
			e.log = e.log.With("environment", e.Name)
		}
		if cfg.Observer != nil {
			e.obs = cfg.Observer(e)
		}
		s.envs = append(s.envs, e)
	}
	return s, nil
}

// ValidateName says why name cannot be an environment's, or nil: the one rule of names, which
// are part of paths, metrics and tokens' scopes.
func ValidateName(name string) error {
	if name == "" || len(name) > 63 || name[0] == '-' || name[0] == '_' ||
		strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return errors.New("a name is lower-case letters, digits, - and _, starting with a letter or digit, at most 63 characters (it is part of paths)")
	}
	return nil
}

// ValidatePrefix says why prefix cannot be an environment's, or nil: whitespace or a control
// character, as in a value pasted with its newline, which no synchronizer writes: served, it
// would hold no data.
func ValidatePrefix(prefix string) error {
	if strings.ContainsFunc(prefix, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return fmt.Errorf("the prefix %q has whitespace or control characters: no synchronizer writes one", prefix)
	}
	return nil
}

// Environments are the environments served, in the order given to New.
func (s *Service) Environments() []*Environment { return s.envs }

// Names are the names of envs, in their order: what a message lists, and what a route or a
// token's scope may name.
func Names(envs []*Environment) []string {
	names := make([]string, len(envs))
	for i, e := range envs {
		names[i] = e.Name
	}
	return names
}

// StaleAfter is the staleness threshold, which /status reports beside each status.
func (s *Service) StaleAfter() time.Duration { return s.cfg.StaleAfter }

// Changes returns a channel closed by the next poll that changes an environment's Available,
// Stale or data: take it, read the statuses, wait for it, and take the next.
func (s *Service) Changes() <-chan struct{} { return *s.changes.Load() }

// Drain makes Readiness false from now on, so that load balancers stop sending traffic.
func (s *Service) Drain() { s.draining.Store(true) }

// Draining reports whether Drain was called.
func (s *Service) Draining() bool { return s.draining.Load() }

// Readiness says whether this instance should get traffic, and if not why, naming each
// environment at fault when there are several.
func (s *Service) Readiness() (ready bool, reason string) {
	if s.Draining() {
		return false, "shutting down"
	}
	var not []string
	for _, e := range s.envs {
		var why string
		st, polled := e.Status()
		switch {
		case !polled:
			why = "the store's status has not been polled yet"
		case !st.Available:
			why = "the Big Segment store is unavailable"
		case s.cfg.ReadyRequiresFresh && st.Stale:
			why = "the Big Segment data is stale"
		default:
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
	return context.WithTimeoutCause(ctx, s.cfg.LookupTimeout, s.timeout)
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
	Stale      LookupStatus = "STALE"       // the data was not synchronized within StaleAfter (or ever)
	StoreError LookupStatus = "STORE_ERROR" // the read failed, or the last poll could not read the store
)

// StoreStatus is an environment's status after a poll.
type StoreStatus struct {
	Available        bool      // the poll read the metadata
	Stale            bool      // never synchronized, or last synchronized StaleAfter or more before the poll
	LastSynchronized time.Time // the last synchronization time known, zero if none
	Cursor           string    // the last cursor known, "" if none
	DataChangedAt    time.Time // when a poll first saw the data as it is; zero without a cursor
	CheckedAt        time.Time // when the poll ran
	LastError        string    // while unavailable: why, as the logs say it ("" while available)
	LastErrorAt      time.Time // when the store became unavailable: the first poll of the outage
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
	if st == nil {
		return StoreStatus{Stale: true}, false
	}
	return *st, true
}

func (e *Environment) snapshot() (*StoreStatus, uint64) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.status, e.gen
}

// firstStatus is snapshot's, after a poll within ctx if none has finished yet, so that the
// first answers carry a true status.
func (e *Environment) firstStatus(ctx context.Context) (*StoreStatus, uint64) {
	st, gen := e.snapshot()
	if st != nil {
		return st, gen
	}
	e.svc.poll(ctx, true)
	if st, gen = e.snapshot(); st == nil { // ctx ended first
		st = &StoreStatus{Stale: true, CheckedAt: e.svc.cfg.Now()}
	}
	return st, gen
}

// Poll polls every environment now, after the poll running (if any), which may predate a
// change: the embedded store's reload calls it.
func (s *Service) Poll(ctx context.Context) { s.poll(ctx, false) }

// poll takes the poll lock within ctx and polls, unless onlyFirst and a poll has finished. A
// poll whose caller has gone records nothing: that is no failure of the store.
func (s *Service) poll(ctx context.Context, onlyFirst bool) {
	select {
	case s.polling <- struct{}{}:
		defer func() { <-s.polling }()
	case <-ctx.Done():
		return
	}
	if st, _ := s.envs[0].snapshot(); onlyFirst && st != nil {
		return
	}
	readCtx, cancel := s.withTimeout(ctx)
	defer cancel()
	start := time.Now()
	var reads []MetadataRead
	if err := safely(func() { reads = s.cfg.ReadMetadata(readCtx) }); err != nil {
		reads = slices.Repeat([]MetadataRead{{Err: err}}, len(s.envs))
	}
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return
	}
	s.envs[0].obs.StoreRead(OpMetadata, time.Since(start), nil) // its failures are each environment's StatusPolled
	changed := false
	for i, e := range s.envs {
		r := MetadataRead{Err: errors.New("read metadata: no answer for the store")}
		if i < len(reads) {
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

// record publishes the status a poll found, and says whether Available, Stale or the data
// changed. A new cursor begins a cache generation, with an empty pair.
func (e *Environment) record(md Metadata, err error) bool {
	now := e.svc.cfg.Now()
	e.mu.Lock()
	prev := e.status
	var st StoreStatus
	if prev != nil {
		st = *prev
	}
	st.Available, st.CheckedAt = err == nil, now
	dataChanged := err == nil && prev != nil && md.Cursor != prev.Cursor
	if err != nil {
		if prev == nil || prev.Available {
			st.LastErrorAt = now
		}
		st.LastError = err.Error()
	} else {
		st.LastError, st.LastErrorAt, st.LastSynchronized = "", time.Time{}, md.LastSynchronized
		e.readFailed = false // a read failed before this poll stops none after it
		if prev == nil || dataChanged {
			st.Cursor, st.DataChangedAt = md.Cursor, now
		}
		if st.Cursor == "" {
			st.DataChangedAt = time.Time{}
		}
	}
	// The SDKs' rule; a synchronization time in the future (clock skew) is not stale.
	st.Stale = st.LastSynchronized.IsZero() || now.Sub(st.LastSynchronized) >= e.svc.cfg.StaleAfter
	e.status = &st
	if dataChanged {
		e.gen++
		e.young, e.old = newGoCache(), newGoCache()
	}
	e.mu.Unlock()

	changed := prev == nil || prev.Available != st.Available || prev.Stale != st.Stale
	e.obs.StatusPolled(st, err, changed)
	if dataChanged {
		e.obs.DataChanged()
	}
	if changed {
		e.logStatus(st, err)
	}
	return changed || dataChanged
}

// logStatus logs a change of the status, once: not at every poll.
func (e *Environment) logStatus(st StoreStatus, err error) {
	switch {
	case err != nil && e.svc.cfg.ErrorCode != nil:
		e.log.Error("big segment store unavailable", "code", e.svc.cfg.ErrorCode(err), "err", err.Error())
	case err != nil:
		e.log.Error("big segment store unavailable", "err", err.Error())
	case st.Stale && st.LastSynchronized.IsZero():
		e.log.Warn(fmt.Sprintf("big segment data is stale: no synchronization recorded under prefix %q: check that it is the prefix the synchronizer writes", e.Prefix),
			"prefix", e.Prefix)
	case st.Stale:
		e.log.Warn("big segment data is stale", "lastSynchronized", st.LastSynchronized)
	default:
		e.log.Info("big segment store healthy")
	}
}

// Run polls at once, then every poll interval (every second while a store is unavailable, so
// that an outage ends for lookups within a second of its cause), until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	for {
		s.Poll(ctx)
		next := s.cfg.PollInterval
		for _, e := range s.envs {
			if st, _ := e.Status(); !st.Available {
				next = min(next, time.Second)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}
