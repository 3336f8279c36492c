package segments

import (
	"context"
	"time"
)

// Store is where a synchronizer has written Big Segments. It only ever sees context hashes,
// never keys, exactly like the store interface of the LaunchDarkly SDKs. Its methods are
// called concurrently; the package documentation has the whole contract.
type Store interface {
	// Memberships reads the memberships of the contexts with the given hashes, in one round
	// trip where the store allows it. The result has one Read per hash, in the same order. A
	// context with nothing stored has an empty Membership and no error.
	Memberships(ctx context.Context, hashes []string) []Read

	// Metadata reads what the synchronizer last recorded about the data as a whole.
	Metadata(ctx context.Context) (Metadata, error)
}

// Read is one context's entry in a Store.Memberships result.
type Read struct {
	Membership Membership
	// Err is set when this context's membership could not be read; then Membership is empty
	// and must not be trusted or cached.
	Err error
}

// Metadata is what a synchronizer records about the data as a whole.
type Metadata struct {
	// LastSynchronized is when the synchronizer last brought the data up to date; the zero
	// time means it never has. Synchronizers also set it while idle, so it changing does not
	// mean the data did.
	LastSynchronized time.Time
	// Cursor is the synchronizer's version of the data (the Relay Proxy sets it in the same
	// transaction as every change), "" when the store has none: older synchronizers, data
	// written by hand. A new cursor means the data changed.
	Cursor string
}

// Bounds on what a store's metadata may hold; a store reports larger values as
// ErrInvalidMetadata, and reads no more of them than these. They are constants so that no
// importer can move a bound that every store and fixture must agree on.
const (
	// MaxSynchronizedOnMillis is the latest synchronization time that is real, in unix
	// milliseconds as stores hold it: the last millisecond of year 9999 (later ones cannot even
	// be written as RFC 3339).
	MaxSynchronizedOnMillis int64 = 253402300799999

	// MaxCursorBytes bounds the length of a cursor.
	MaxCursorBytes = 1024
)
