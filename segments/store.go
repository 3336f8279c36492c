package segments

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"
	"unique"
)

// Store is where a synchronizer wrote one environment's Big Segments, read by hash (see the package documentation).
type Store interface {
	// Memberships reads the contexts' memberships: one Read per hash, in order.
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

// MetadataRead is one environment's metadata, as Config.ReadMetadata returns it.
type MetadataRead struct {
	Metadata Metadata
	Err      error
}

// StoreView is a store as it names itself, with no secret in it, for an operator to compare with what was written.
type StoreView struct {
	Kind   string   // "redis", "dynamodb" or "embedded"
	Prefix string   // the key prefix as stored ("" for none)
	Table  string   // DynamoDB's table, "" elsewhere
	Keys   []string // Redis keys, or DynamoDB items as "namespace/key"
}

// Bounds on a store's metadata: a store reports larger values as ErrInvalidMetadata.
const (
	MaxSynchronizedOnMillis int64 = 253402300799999 // the last millisecond of year 9999, the last RFC 3339 can write
	MaxCursorBytes                = 1024
)

// Errors of reads (the package documentation says when each is returned).
var (
	ErrInvalidMetadata  = errors.New("invalid Big Segment metadata")                                        // answered, but not valid: unavailable yet readable
	ErrInvalidData      = errors.New("invalid Big Segment data")                                            // a membership not answerable as it is (a ref not UTF-8)
	ErrStoreUnreachable = errors.New("the Big Segment store is unreachable: its last poll and read failed") // misses fail at once until a poll answers
)

// MaxHashLen bounds a context hash from callers, so that no input makes a large store key.
const MaxHashLen = 128

// Hash returns the hash synchronizers store a context key's memberships under: base64 of its SHA-256.
func Hash(contextKey string) string {
	sum := sha256.Sum256([]byte(contextKey))
	var b [44]byte
	base64.StdEncoding.Encode(b[:], sum[:])
	return string(b[:]) // one allocation, where EncodeToString makes two
}

const hashWanted = "a context hash is the standard base64 (44 characters, padded) of the 32-byte SHA-256 of the context key"

// ValidateHash says why s cannot be a context hash, or nil: a caller's mistake is an error, not "no membership".
func ValidateHash(s string) error {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
	outside := strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune(alphabet, r) })
	switch {
	case len(s) > MaxHashLen:
		return fmt.Errorf("context hash is %d characters long, more than %d; %s", len(s), MaxHashLen, hashWanted)
	case s == "":
		return errors.New("context hash is empty; " + hashWanted)
	case outside >= 0:
		return fmt.Errorf("context hash has a character outside the standard base64 alphabet at offset %d; %s", outside, hashWanted)
	case len(s) >= 32 && strings.Trim(s, "0123456789abcdefABCDEF") == "": // also base64, but never the SHA-256 of a key
		return errors.New("context hash looks like hex; " + hashWanted)
	}
	if _, err := base64.StdEncoding.Strict().DecodeString(s); err != nil {
		return errors.New("context hash is not canonical padded base64; " + hashWanted)
	}
	return nil
}

// Membership is the Big Segment refs (such as "beta-users.g3") a context is included in or excluded
// from; the zero value is "no membership". Identical sets share one interned encoding.
type Membership struct {
	h unique.Handle[string] // per ref, in order: '+' (included) or '-', its length (uvarint), the ref
}

// NewMembership returns the membership with the given refs; a ref in both lists is included, as in the SDKs.
func NewMembership(included, excluded []string) Membership {
	if len(included)+len(excluded) == 0 {
		return Membership{}
	}
	flags := make(map[string]byte, len(included)+len(excluded))
	for _, r := range excluded {
		flags[r] = '-'
	}
	for _, r := range included {
		flags[r] = '+'
	}
	var buf []byte
	for _, r := range slices.Sorted(maps.Keys(flags)) {
		buf = append(buf, flags[r])
		buf = binary.AppendUvarint(buf, uint64(len(r)))
		buf = append(buf, r...)
	}
	return Membership{unique.Make(string(buf))}
}

// All yields each ref with true for included, in ascending byte order: encoders need not sort.
func (m Membership) All() iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		if m.h == (unique.Handle[string]{}) {
			return
		}
		for s := m.h.Value(); len(s) > 0; {
			n, w := binary.Uvarint([]byte(s[1:min(len(s), 1+binary.MaxVarintLen64)])) // on the stack: no allocation
			ref, included := s[1+w:1+w+int(n)], s[0] == '+'
			s = s[1+w+int(n):]
			if !yield(ref, included) {
				return
			}
		}
	}
}

// Len returns the number of distinct refs.
func (m Membership) Len() (n int) {
	for range m.All() {
		n++
	}
	return n
}
