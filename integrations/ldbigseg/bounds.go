package ldbigseg

import (
	"errors"
	"math"
)

// DefaultMaxRefs is the most segment refs one membership answer may list unless MaxRefs says
// otherwise.
//
// The SDK caches every answer (1,000 contexts by default), so what one answer may hold, times
// the cache size, is what a broken, compromised or misconfigured bigseg can make the SDK's
// process keep: unbounded, maps of a megabyte per context took an SDK to gigabytes. A context
// is listed in at most hundreds of Big Segments in practice (one ref per segment whose
// included or excluded list names it), so 1,000 leaves room without letting an answer be
// large: at both defaults an SDK's cache of 1,000 contexts holds at most about 150 MiB of
// memberships (measured by TestMembershipBoundHoldsMemory), against 4 GiB without bounds.
const DefaultMaxRefs = 1000

// DefaultMaxRefBytes is the most bytes of segment refs (their lengths added up, as UTF-8) one
// membership answer may hold unless MaxRefBytes says otherwise.
//
// A LaunchDarkly segment ref is the segment's key and its generation ("beta-users.g3"); keys
// are short identifiers, commonly tens of bytes. 64 KiB is 1,000 refs (DefaultMaxRefs) of 64
// bytes on average, or a few hundred with keys of a few hundred bytes.
const DefaultMaxRefBytes = 64 << 10

// ErrAnswerTooLarge is in the error of a call whose answer is over the store's bounds: more
// segment refs than MaxRefs, more bytes of refs than MaxRefBytes, or a body longer than any
// answer within those bounds can be. Nothing of such an answer is kept. Test for it with
// errors.Is.
var ErrAnswerTooLarge = errors.New("the answer is over the store's bounds")

// bounds are what one answer may hold.
type bounds struct {
	maxRefs     int
	maxRefBytes int
}

// envelopeBytes is room for the rest of a lookup answer around its memberships: the context
// hash, the status, bigseg's error message, and fields a later bigseg may add.
const envelopeBytes = 4 << 10

// maxBody is the most of a response the store reads: the longest JSON of a lookup answer within
// the bounds, each ref byte escaped (\u00XX: 6 bytes) and each ref with its punctuation
// (`"":false,`: 9 bytes), and the envelope. With the defaults it is 406,312 bytes. It bounds
// what the store reads of any answer, and holds of one it reads whole (an error, a /status); a
// lookup answer is decoded as it arrives, and the ref bounds bound what it leaves behind.
func (b bounds) maxBody() int64 {
	refs, refBytes := int64(b.maxRefs), int64(b.maxRefBytes)
	if refBytes > (math.MaxInt64-envelopeBytes)/12 || refs > (math.MaxInt64-envelopeBytes)/18 {
		return math.MaxInt64 // each term at most half of what is left: the sum cannot overflow
	}
	return 6*refBytes + 9*refs + envelopeBytes
}

// overBound is the error of an answer over one of the bounds.
type overBound struct{ what string }

func (e *overBound) Error() string { return ErrAnswerTooLarge.Error() + ": " + e.what }
func (e *overBound) Unwrap() error { return ErrAnswerTooLarge }
