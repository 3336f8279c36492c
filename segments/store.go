package segments

import (
	"context"
	"errors"
	"time"
)

// Store is where a synchronizer has written one environment's Big Segments. Like the SDKs'
// store interface it sees context hashes only, never keys. Its methods are called
// concurrently; the package documentation has the whole contract.
type Store interface {
	// Memberships reads the memberships of the given contexts, in one round trip where the
	// store allows it: one Read per hash, in order; nothing stored is the zero Membership.
	Memberships(ctx context.Context, hashes []string) []Read
	// Metadata reads what the synchronizer last recorded about the data as a whole.
	Metadata(ctx context.Context) (Metadata, error)
}

// Read is one context's entry in a Store.Memberships result; with Err set, Membership is
// not to be trusted or cached.
type Read struct {
	Membership Membership
	Err        error
}

// Metadata is what a synchronizer records about the data as a whole.
type Metadata struct {
	// LastSynchronized is when the data was last brought up to date (zero: never); it also
	// moves while the synchronizer is idle.
	LastSynchronized time.Time
	// Cursor is the synchronizer's version of the data, "" for none; a new one means a change.
	Cursor string
}

// MetadataRead is one environment's metadata, as a read of them all returns it (see
// WithMetadataRead).
type MetadataRead struct {
	Metadata Metadata
	Err      error
}

// Bounds on what a store's metadata may hold; a store reports larger values as
// ErrInvalidMetadata and reads no more than these. Constants, since every store and fixture
// must agree on them.
const (
	// MaxSynchronizedOnMillis is the last millisecond of year 9999, in unix milliseconds:
	// later ones cannot be written as RFC 3339.
	MaxSynchronizedOnMillis int64 = 253402300799999
	// MaxCursorBytes bounds the length of a cursor.
	MaxCursorBytes = 1024
)

// Errors of reads. ErrInvalidMetadata marks metadata that the store answered but that is not
// valid: the store is unavailable but reachable, so lookups still read it. ErrInvalidData
// fails a context whose membership cannot be answered as it is (a ref that is not UTF-8).
// ErrStoreUnreachable fails a lookup not even tried: the last poll could not reach the store.
var (
	ErrInvalidMetadata  = errors.New("invalid Big Segment metadata")
	ErrInvalidData      = errors.New("invalid Big Segment data")
	ErrStoreUnreachable = errors.New("the Big Segment store is unreachable")
)
