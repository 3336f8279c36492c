package resp

import (
	"strings"

	"github.com/bigseg/bigseg/segments"
)

// The kinds of key an SDK's Redis Big Segment store reads.
const (
	keySynchronizedOn = iota
	keyInclude
	keyExclude
)

// keys reads the keys of the served prefix, in the LaunchDarkly layout.
type keys struct {
	prefix   string
	syncedOn string
	include  string // prefix of an include set's key, up to the hash
	exclude  string
	expected string // what a client is told the keys are
}

func newKeys(prefix string) keys {
	return keys{
		prefix:   prefix,
		syncedOn: prefix + ":big_segments_synchronized_on",
		include:  prefix + ":big_segment_include:",
		exclude:  prefix + ":big_segment_exclude:",
		expected: "bigseg serves the Big Segments of prefix " + `"` + prefix + `"` +
			": GET " + prefix + ":big_segments_synchronized_on, SMEMBERS " + prefix + ":big_segment_include:{hash} and " +
			prefix + ":big_segment_exclude:{hash}",
	}
}

// parse says which kind of key k is and, for a set, its context hash; ok is false for a key
// bigseg does not serve (another prefix, another shape).
func (ks keys) parse(k string) (kind int, hash string, ok bool) {
	switch {
	case k == ks.syncedOn:
		return keySynchronizedOn, "", true
	case strings.HasPrefix(k, ks.include):
		return keyInclude, k[len(ks.include):], true
	case strings.HasPrefix(k, ks.exclude):
		return keyExclude, k[len(ks.exclude):], true
	}
	return 0, "", false
}

// validHash reports why hash cannot be a context hash, as segments.ValidateHash does.
func validHash(hash string) error { return segments.ValidateHash(hash) }
