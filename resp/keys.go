package resp

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/bigseg/bigseg/segments"
)

// The kinds of key an SDK's Redis Big Segment store reads.
const (
	keySynchronizedOn = iota
	keyInclude
	keyExclude
)

// The keys' shapes after their prefix, in the LaunchDarkly layout.
const (
	syncedOnSuffix = ":big_segments_synchronized_on"
	includeInfix   = ":big_segment_include:"
	excludeInfix   = ":big_segment_exclude:"
)

// keys reads the keys of the environments served, each under its prefix: the prefix of the
// key an SDK asks for selects the environment, as each SDK is configured with its own.
type keys struct {
	byPrefix map[string]*segments.Environment
	expected string // what a client is told the keys are
	generic  string // the same without the prefixes, for when tokens guard them
}

func newKeys(envs []*segments.Environment) keys {
	ks := keys{byPrefix: make(map[string]*segments.Environment, len(envs))}
	var prefixes []string
	for _, e := range envs {
		ks.byPrefix[servedPrefix(e)] = e
		prefixes = append(prefixes, strconv.Quote(servedPrefix(e)))
	}
	what, p := "prefix "+prefixes[0], servedPrefix(envs[0])
	if len(prefixes) > 1 {
		what, p = "prefixes "+strings.Join(prefixes, ", "), "{prefix}"
	}
	shape := ": GET %s" + syncedOnSuffix + ", SMEMBERS %[1]s" + includeInfix + "{hash} and %[1]s" + excludeInfix + "{hash}"
	ks.expected = "bigseg serves the Big Segments of " + what + fmt.Sprintf(shape, p)
	ks.generic = "bigseg serves Big Segments only" + fmt.Sprintf(shape, "{prefix}")
	return ks
}

// servedPrefix is the prefix env is served under: its own, or for a store with none (DynamoDB's
// default) the SDKs' default, since their Redis stores always read under one.
func servedPrefix(env *segments.Environment) string { return cmp.Or(env.Prefix, "launchdarkly") }

// parse says which environment's key k is, which kind, and, for a set, its context hash; env
// is nil for a key bigseg does not serve (another prefix, another shape). A hash holds no ':',
// so a set's prefix is what comes before the last infix.
func (ks keys) parse(k string) (env *segments.Environment, kind int, hash string) {
	if prefix, ok := strings.CutSuffix(k, syncedOnSuffix); ok {
		return ks.byPrefix[prefix], keySynchronizedOn, ""
	}
	for _, set := range []struct {
		infix string
		kind  int
	}{{includeInfix, keyInclude}, {excludeInfix, keyExclude}} {
		// A SHA-256 hash is 44 characters: where the infix is just before the last 44 and they
		// hold no ':', it is the last one (it ends with ':'), and the search is not needed.
		if i := len(k) - sha256HashLen - len(set.infix); i >= 0 && k[i:i+len(set.infix)] == set.infix &&
			strings.IndexByte(k[i+len(set.infix):], ':') < 0 {
			return ks.byPrefix[k[:i]], set.kind, k[i+len(set.infix):]
		}
		if i := strings.LastIndex(k, set.infix); i >= 0 && !strings.Contains(k[i+len(set.infix):], ":") {
			return ks.byPrefix[k[:i]], set.kind, k[i+len(set.infix):]
		}
	}
	return nil, 0, ""
}

// validHash reports why hash cannot be a context hash, as segments.ValidateHash does. A
// SHA-256 hash in canonical base64 (44 characters, one '=', the last character's two unused
// bits zero) is checked here without decoding it; anything else is left to ValidateHash.
func validHash(hash string) error {
	if len(hash) == sha256HashLen && hash[43] == '=' && base64Value[hash[42]]&3 == 0 {
		ok := true
		for i := range 43 {
			ok = ok && base64Value[hash[i]] != invalid
		}
		if ok {
			return nil
		}
	}
	return segments.ValidateHash(hash)
}

const invalid = 0xff

// sha256HashLen is the length of a SHA-256 hash in padded base64.
const sha256HashLen = 44

// base64Value is the value of each character of the standard base64 alphabet, invalid for the
// others ('=' included).
var base64Value = func() (t [256]byte) {
	for i := range t {
		t[i] = invalid
	}
	for i, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		t[c] = byte(i)
	}
	return t
}()
