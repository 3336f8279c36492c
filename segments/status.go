package segments

import "time"

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
	// Stale is true when the store was never synchronized, or was last synchronized staleAfter
	// or longer before the poll. A failed poll keeps the last known synchronization time, so a
	// store that was stale stays stale while unavailable.
	Stale bool
	// Unreachable is true when the poll failed to reach the store at all (as opposed to
	// reading metadata that is not valid): lookups then fail at once instead of each trying.
	Unreachable bool
	// LastSynchronized is the last synchronization time known, zero if none is.
	LastSynchronized time.Time
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
