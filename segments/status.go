package segments

import (
	"context"
	"errors"
	"time"
)

// recoveryPollInterval is how often the status is polled while the store is unreachable, if
// the poll interval is longer: lookups fail fast meanwhile, so recovery should be seen soon.
const recoveryPollInterval = time.Second

// ErrInvalidMetadata marks a Metadata error where the store answered, but with data that is
// not valid metadata: the store is unavailable, but reachable, so lookups still read it.
var ErrInvalidMetadata = errors.New("invalid Big Segment metadata")

// ErrInvalidData is the error of a context whose stored membership cannot be answered as it
// is, such as a segment ref that is not UTF-8 text: the lookup fails rather than answer a
// changed ref.
var ErrInvalidData = errors.New("invalid Big Segment data")

// LookupStatus says how far a lookup's answer can be trusted, with the values and meaning of
// the LaunchDarkly SDKs' BigSegmentsStatus.
type LookupStatus string

// Lookup statuses, in order of precedence: a failed read or an unavailable store outranks
// staleness.
const (
	// Healthy: the membership was read from a store that is available and up to date.
	Healthy LookupStatus = "HEALTHY"
	// Stale: the store is available, but the synchronizer has not updated it within staleAfter
	// (or ever), so the answer may be out of date.
	Stale LookupStatus = "STALE"
	// StoreError: the read failed, or the last status poll could not read the store.
	StoreError LookupStatus = "STORE_ERROR"
)

// StoreStatus is the result of one status poll.
type StoreStatus struct {
	// Available is true when the poll read the store's metadata.
	Available bool
	// Unreachable is true when the poll failed to reach the store at all (as opposed to
	// reading metadata that is not valid): lookups then fail at once instead of each trying.
	Unreachable bool
	// Stale is true when the store was never synchronized, or was last synchronized staleAfter
	// or longer before the poll. A failed poll keeps the last known synchronization time, so a
	// store that was stale stays stale while unavailable.
	Stale bool
	// LastSynchronized is the last synchronization time known, zero if none is.
	LastSynchronized time.Time
	// Cursor is the last cursor known (see Metadata.Cursor), "" if none is.
	Cursor string
	// DataChangedAt is when a poll first saw the data as it is now: the first poll, or the
	// one that found a new cursor. Zero while the store has no cursor, since then changes
	// cannot be seen.
	DataChangedAt time.Time
	// CheckedAt is when the poll ran.
	CheckedAt time.Time
}

// LookupStatus is the status a lookup answered under this store status gets when its own
// read succeeded.
func (s StoreStatus) LookupStatus() LookupStatus {
	switch {
	case !s.Available:
		return StoreError
	case s.Stale:
		return Stale
	default:
		return Healthy
	}
}

// isStale applies the SDKs' rule: never synchronized, or synchronized staleAfter or more ago.
// A synchronization time in the future (clock skew between hosts) is not stale.
func isStale(lastSynchronized, now time.Time, staleAfter time.Duration) bool {
	if lastSynchronized.IsZero() {
		return true
	}
	return now.Sub(lastSynchronized) >= staleAfter
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
// Available, Stale or the data changed, and returns it. A new cursor drops every cached
// answer. Run calls it on schedule. Polls run one at a time, so a slow poll never overwrites
// the status of a later one.
func (s *Service) Poll(ctx context.Context) StoreStatus {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if !s.lockPoll(ctx) { // a poll before it is stuck: its outcome will be the status
		st, _ := s.Status()
		return st
	}
	defer s.unlockPoll()
	start := time.Now()
	md, err := s.store.Metadata(ctx)
	return s.record(md, err, time.Since(start))
}

func (s *Service) lockPoll(ctx context.Context) bool {
	select {
	case s.pollLock <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Service) unlockPoll() { <-s.pollLock }

// record makes the status of a poll that read md and err in d its own, with the poll lock
// held: see Poll.
func (s *Service) record(md Metadata, err error, d time.Duration) StoreStatus {
	s.obs.StoreRead(OpMetadata, d, err)
	prev := s.status.Load()
	st, dataChanged := s.nextStatus(prev, md, err)
	if dataChanged {
		s.cache.invalidate()
	}
	s.status.Store(&st)

	changed := prev == nil || prev.Available != st.Available || prev.Stale != st.Stale
	s.obs.StatusPolled(st, err, changed)
	if dataChanged {
		s.obs.DataChanged()
		s.log.Debug("big segment data changed", "cursor", st.Cursor)
	}
	if changed {
		s.logChange(st, err)
	}
	if changed || dataChanged {
		s.publish(st)
	}
	return st
}

// nextStatus is the status after a poll that read md and err, given the status before it;
// dataChanged says whether the poll found a new cursor. A failed poll keeps what was known.
func (s *Service) nextStatus(prev *StoreStatus, md Metadata, err error) (st StoreStatus, dataChanged bool) {
	now := s.now()
	st = StoreStatus{CheckedAt: now}
	if prev != nil {
		st.LastSynchronized, st.Cursor, st.DataChangedAt = prev.LastSynchronized, prev.Cursor, prev.DataChangedAt
	}
	if err != nil {
		st.Unreachable = !errors.Is(err, ErrInvalidMetadata)
	} else {
		st.Available, st.LastSynchronized = true, md.LastSynchronized
		dataChanged = prev != nil && md.Cursor != prev.Cursor
		if prev == nil || dataChanged {
			st.Cursor, st.DataChangedAt = md.Cursor, now
		}
		if st.Cursor == "" {
			st.DataChangedAt = time.Time{}
		}
	}
	st.Stale = isStale(st.LastSynchronized, now, s.staleAfter)
	return st, dataChanged
}

func (s *Service) logChange(st StoreStatus, err error) {
	attrs := []any{"available", st.Available, "stale", st.Stale}
	if !st.LastSynchronized.IsZero() {
		attrs = append(attrs, "lastSynchronized", st.LastSynchronized.UTC().Format(time.RFC3339Nano))
	}
	switch {
	case err != nil:
		if s.errorCode != nil {
			attrs = append(attrs, "code", s.errorCode(err))
		}
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
	return NewGroup(nil, []*Service{s}, nil).Run(ctx)
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

// subscription delivers status changes to one subscriber without ever blocking the poller:
// it holds at most one undelivered status, and a newer one replaces it. A slow subscriber
// loses intermediate changes but always ends up with the latest.
type subscription struct {
	ch chan StoreStatus
}

func (sub *subscription) offer(st StoreStatus) {
	for {
		select {
		case sub.ch <- st:
			return
		default:
		}
		select {
		case <-sub.ch: // drop the undelivered, superseded status
		default:
		}
	}
}

// Subscribe returns a channel that receives each change of the store's Available or Stale,
// and of its data (a new cursor), and a function that ends the subscription. Polls that change
// nothing send nothing. The channel holds one status: a subscriber that does not keep up sees
// only the latest change. Call cancel when done; it never closes the channel, so a receiver
// must also watch its own context.
func (s *Service) Subscribe() (<-chan StoreStatus, func()) {
	sub := &subscription{ch: make(chan StoreStatus, 1)}
	s.subsMu.Lock()
	s.subs[sub] = struct{}{}
	s.subsMu.Unlock()
	return sub.ch, func() {
		s.subsMu.Lock()
		delete(s.subs, sub)
		s.subsMu.Unlock()
	}
}

// publish offers st to every subscriber.
func (s *Service) publish(st StoreStatus) {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	for sub := range s.subs {
		sub.offer(st)
	}
}
