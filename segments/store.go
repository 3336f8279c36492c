package segments

import (
	"context"
	"errors"
	"time"
)

// Store is where a synchronizer has written one environment's Big Segments. Like the SDKs'
// store it sees context hashes only; the package documentation has the whole contract.
type Store interface {
	// Memberships reads the given contexts' memberships, in one round trip where the store
	// allows it: one Read per hash, in order; nothing stored is the zero Membership.
	Memberships(ctx context.Context, hashes []string) []Read
	// Metadata reads what the synchronizer last recorded about the data as a whole.
	Metadata(ctx context.Context) (Metadata, error)
}

// Read is one context's entry in a Store.Memberships result; with Err set, Membership is unused.
type Read struct {
	Membership Membership
	Err        error
}

// Metadata is what a synchronizer records about the data as a whole.
type Metadata struct {
	LastSynchronized time.Time // when the data was last brought up to date, also while idle; zero: never
	Cursor           string    // the synchronizer's version of the data, "" for none: a new one means a change
}

// MetadataRead is one environment's metadata, as WithMetadataRead's read returns it.
type MetadataRead struct {
	Metadata Metadata
	Err      error
}

// Bounds on a store's metadata, which every store and fixture must agree on: a store reads no
// more than these and reports larger values as ErrInvalidMetadata.
const (
	MaxSynchronizedOnMillis int64 = 253402300799999 // the last millisecond of year 9999, the last RFC 3339 can write
	MaxCursorBytes                = 1024
)

// Errors of reads (the package documentation says when each is returned).
var (
	ErrInvalidMetadata  = errors.New("invalid Big Segment metadata")         // answered, but not valid: unavailable yet readable
	ErrInvalidData      = errors.New("invalid Big Segment data")             // a membership not answerable as it is (a ref not UTF-8)
	ErrStoreUnreachable = errors.New("the Big Segment store is unreachable") // the last poll could not reach the store
)
