package segments

import (
	"context"
	"errors"
	"sync"
	"time"
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
	if st := e.status.Load(); st != nil {
		return *st, true
	}
	return StoreStatus{Stale: true}, false
}

// firstStatus is the last status or, before the first poll has finished, that of a poll
// shared with every other caller and with Run, so that the first lookups get a true status.
func (e *Environment) firstStatus(ctx context.Context) *StoreStatus {
	if st := e.status.Load(); st != nil {
		return st
	}
	select {
	case <-e.svc.polls.DoChan("", func() (any, error) {
		if e.status.Load() == nil {
			return e.svc.pollNow(context.WithoutCancel(ctx)), nil
		}
		return e.svc.pollSeq.Load(), nil
	}):
		if st := e.status.Load(); st != nil {
			return st
		}
	case <-ctx.Done():
	}
	return &StoreStatus{Stale: true, CheckedAt: e.svc.now()}
}

// Poll polls every environment now, after waiting out a poll already running (its read may
// predate what the caller changed).
func (s *Service) Poll(ctx context.Context) {
	if before := s.pollSeq.Load(); s.poll(ctx) <= before {
		s.poll(ctx)
	}
}

// poll runs a poll, or joins the one running, and returns its number: one at a time, so
// that a slow poll never overwrites a later one.
func (s *Service) poll(ctx context.Context) uint64 {
	v, _, _ := s.polls.Do("", func() (any, error) { return s.pollNow(ctx), nil })
	return v.(uint64)
}

func (s *Service) pollNow(ctx context.Context) uint64 {
	seq := s.pollSeq.Add(1)
	readCtx, cancel := s.withTimeout(ctx)
	defer cancel()
	start := time.Now()
	readCtx, span := s.startPoll(readCtx)
	reads := s.read(readCtx)
	endPoll(span, reads)
	if ctx.Err() != nil { // Run is ending: no answer from the store, but no failure of it either
		return seq
	}
	d, changed := time.Since(start), false
	s.envs[0].obs.StoreRead(OpMetadata, d, nil) // one read for all: its failures are each environment's StatusPolled
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
	return seq
}

// readEach is the metadata read without WithMetadataRead.
func (s *Service) readEach(ctx context.Context) []MetadataRead {
	reads := make([]MetadataRead, len(s.envs))
	for i, e := range s.envs {
		reads[i].Metadata, reads[i].Err = e.Store.Metadata(ctx)
	}
	return reads
}

// record publishes the status after a poll that read md and err, and says whether
// Available, Stale or the data (a new cursor, which drops the cache first) changed.
func (e *Environment) record(md Metadata, err error) bool {
	now, prev := e.svc.now(), e.status.Load()
	st := StoreStatus{}
	if prev != nil {
		st = *prev
	}
	st.Available, st.Unreachable, st.CheckedAt = err == nil, err != nil && !errors.Is(err, ErrInvalidMetadata), now
	dataChanged := err == nil && prev != nil && md.Cursor != prev.Cursor
	if err == nil {
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
	e.status.Store(&st)
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

// Run is the poll loop, and keeps each environment's store readers, until ctx ends; it
// returns once every goroutine it started has finished. It runs once.
func (s *Service) Run(ctx context.Context) error {
	gone := make(chan struct{})
	if !s.readers.CompareAndSwap(s.idle, &gone) {
		return errors.New("segments: Run is already running or has run")
	}
	var wg sync.WaitGroup
	defer func() { wg.Wait(); close(gone) }() // lookups read what is still queued then
	for _, e := range s.envs {
		for range s.readsInFlight {
			wg.Go(func() { e.readMisses(ctx) })
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			s.poll(ctx)
			next := s.pollInterval
			for _, e := range s.envs {
				if st := e.status.Load(); st != nil && st.Unreachable {
					next = min(next, recoveryPollInterval)
				}
			}
			timer.Reset(next)
		}
	}
}
