package segments

import (
	"cmp"
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// recoveryPollInterval is how often Run polls while a store is unreachable, if sooner.
const recoveryPollInterval = time.Second

// LookupStatus says how far a lookup's answer can be trusted: the values and precedence of
// the SDKs' BigSegmentsStatus.
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

// Status returns the environment's last polled status, never reading the store, and false
// before the first poll has finished (unavailable and stale, as never synchronized).
func (e *Environment) Status() (StoreStatus, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.status != nil {
		return *e.status, true
	}
	return StoreStatus{Stale: true}, false
}

// snapshot is the last status (nil before the first poll) and the cache generation.
func (e *Environment) snapshot() (*StoreStatus, uint64) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.status, e.cache.generation
}

// firstStatus is the last status and the cache generation or, before the first poll has
// finished, those after a poll, unless one finished meanwhile, within ctx, so that the first
// lookups get a true status.
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

// Poll polls every environment now, once the poll running (if any), whose read may predate
// what the caller changed, is done.
func (s *Service) Poll(ctx context.Context) { s.poll(ctx, func() bool { return true }) }

// poll takes the poll lock within ctx and polls if still needed: polls run one at a time, so
// that a slow poll never overwrites a later one.
func (s *Service) poll(ctx context.Context, needed func() bool) {
	select {
	case s.polling <- struct{}{}:
		if needed() {
			s.pollNow(ctx)
		}
		<-s.polling
	case <-ctx.Done():
	}
}

// pollNow polls, holding the poll lock. A poll whose caller has gone (Run ending, a lookup's
// caller hanging up) records nothing: that is no failure of the store.
func (s *Service) pollNow(ctx context.Context) {
	readCtx, cancel := s.withTimeout(ctx)
	defer cancel()
	start := time.Now()
	readCtx, end := s.span(readCtx, "poll", true)
	var reads []MetadataRead
	panicked := safely(func() { reads = s.read(readCtx) })
	failed := panicked
	for i := range s.envs {
		if i == len(reads) { // a read that panicked, or answered for fewer environments
			reads = append(reads, MetadataRead{Err: cmp.Or(panicked, errors.New("read metadata: no answer for the store"))})
		}
		failed = cmp.Or(failed, reads[i].Err)
	}
	end(failed, attribute.Int("bigseg.environments", len(s.envs)))
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return
	}
	d, changed := time.Since(start), false
	s.envs[0].obs.StoreRead(OpMetadata, d, nil) // one read for all: its failures are each environment's StatusPolled
	for i, e := range s.envs {
		changed = e.record(reads[i].Metadata, reads[i].Err) || changed
	}
	if changed {
		close(*s.changes.Swap(new(make(chan struct{}))))
	}
}

// readEach is the metadata read without WithMetadataRead.
func (s *Service) readEach(ctx context.Context) []MetadataRead {
	reads := make([]MetadataRead, len(s.envs))
	for i, e := range s.envs {
		if err := safely(func() { reads[i].Metadata, reads[i].Err = e.Store.Metadata(ctx) }); err != nil {
			reads[i].Err = err
		}
	}
	return reads
}

// record publishes the status after a poll that read md and err, and says whether
// Available, Stale or the data (a new cursor, which drops the cache with it) changed.
func (e *Environment) record(md Metadata, err error) bool {
	now := e.svc.now()
	e.mu.Lock()
	prev, st := e.status, StoreStatus{}
	if prev != nil {
		st = *prev
	}
	st.Available, st.Unreachable, st.CheckedAt = err == nil, err != nil && !errors.Is(err, ErrInvalidMetadata), now
	dataChanged := err == nil && prev != nil && md.Cursor != prev.Cursor
	if err != nil && (prev == nil || prev.Available || prev.LastError != err.Error()) {
		st.LastError, st.LastErrorAt = err.Error(), now
	}
	if err == nil {
		st.LastError, st.LastErrorAt = "", time.Time{}
		st.LastSynchronized = md.LastSynchronized
		if prev == nil || dataChanged {
			st.Cursor, st.DataChangedAt = md.Cursor, now
		}
		if st.Cursor == "" {
			st.DataChangedAt = time.Time{}
		}
	}
	// The SDKs' rule; a synchronization time in the future (clock skew) is not stale.
	st.Stale = st.LastSynchronized.IsZero() || now.Sub(st.LastSynchronized) >= e.svc.staleAfter
	if dataChanged {
		e.cache.invalidate()
	}
	e.status = &st
	e.mu.Unlock()
	changed := prev == nil || prev.Available != st.Available || prev.Stale != st.Stale
	e.obs.StatusPolled(st, err, changed)
	if dataChanged {
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

// errAttrs are the log attributes of a store error: its text and, with WithErrorCode, its code.
func (s *Service) errAttrs(err error) []any {
	if s.errorCode == nil {
		return []any{"err", err.Error()}
	}
	return []any{"code", s.errorCode(err), "err", err.Error()}
}

// Run is the poll loop of every environment: it polls at once, then every poll interval (every
// second while a store is unreachable, if sooner), until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
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
