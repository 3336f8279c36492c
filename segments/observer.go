package segments

import "time"

// Store operations, as passed to Observer.StoreRead.
const (
	OpMemberships = "memberships"
	OpMetadata    = "metadata"
)

// Observer is told what an environment does, for metrics. It is called synchronously on hot
// paths, so it must be fast and safe for concurrent use.
type Observer interface {
	// Lookup is called once per context looked up, with its status and whether it was cached.
	Lookup(status LookupStatus, cached bool)
	// StoreRead is called after every store read with its operation, duration and error; for
	// metadata, once a poll (all environments' in one read), on the first environment's
	// Observer, with no error: each environment's failure is told by its StatusPolled.
	StoreRead(op string, d time.Duration, err error)
	// StatusPolled is called after every poll; changed says whether Available or Stale
	// differs from the poll before (always true for the first).
	StatusPolled(st StoreStatus, err error, changed bool)
	// DataChanged is called when a poll finds a new cursor: the cache was just dropped.
	DataChanged()
}

type nopObserver struct{}

func (nopObserver) Lookup(LookupStatus, bool)              {}
func (nopObserver) StoreRead(string, time.Duration, error) {}
func (nopObserver) StatusPolled(StoreStatus, error, bool)  {}
func (nopObserver) DataChanged()                           {}
