package segments

import (
	"encoding/binary"
	"iter"
	"slices"
	"strings"
	"unicode/utf8"
	"unique"
)

// Membership is the set of Big Segment refs (such as "beta-users.g3") that a context is
// explicitly included in or excluded from. The zero value means "no membership".
//
// A Membership is immutable and one machine word wide: identical sets share one interned,
// canonical encoding, so a cache of millions of contexts holds each distinct set once. Real data
// repeats the same few sets endlessly, which is what makes this pay.
type Membership struct {
	h unique.Handle[string]
}

// NewMembership returns the membership with the given refs. A ref listed as both included and
// excluded is included: inclusion wins, as in the LaunchDarkly SDKs.
func NewMembership(included, excluded []string) Membership {
	if len(included)+len(excluded) == 0 {
		return Membership{}
	}
	type entry struct {
		ref      string
		included bool
	}
	entries := make([]entry, 0, len(included)+len(excluded))
	for _, r := range included {
		entries = append(entries, entry{r, true})
	}
	for _, r := range excluded {
		entries = append(entries, entry{r, false})
	}
	// Sort by ref with included first, so that the first of each run of equal refs is the
	// one that counts.
	slices.SortFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.ref, b.ref); c != 0 {
			return c
		}
		switch {
		case a.included == b.included:
			return 0
		case a.included:
			return -1
		default:
			return 1
		}
	})
	size := 0
	for _, e := range entries {
		size += 1 + binary.MaxVarintLen64 + len(e.ref)
	}
	buf := make([]byte, 0, size)
	for i, e := range entries {
		if i > 0 && entries[i-1].ref == e.ref {
			continue
		}
		flag := byte('-')
		if e.included {
			flag = '+'
		}
		buf = append(buf, flag)
		buf = binary.AppendUvarint(buf, uint64(len(e.ref)))
		buf = append(buf, e.ref...)
	}
	return Membership{unique.Make(string(buf))}
}

func (m Membership) encoded() string {
	if m.h == (unique.Handle[string]{}) {
		return ""
	}
	return m.h.Value()
}

// All yields each ref with true for included or false for excluded, in ascending byte order of
// the refs. Callers that encode responses get a stable order without sorting.
func (m Membership) All() iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		s := m.encoded()
		for len(s) > 0 {
			included := s[0] == '+'
			n, w := uvarint(s[1:])
			start := 1 + w
			ref := s[start : start+int(n)]
			s = s[start+int(n):]
			if !yield(ref, included) {
				return
			}
		}
	}
}

// Len returns the number of distinct refs.
func (m Membership) Len() int {
	n := 0
	for range m.All() {
		n++
	}
	return n
}

// validUTF8 reports whether every ref is valid UTF-8, as JSON answers need.
func (m Membership) validUTF8() bool {
	for r := range m.All() {
		if !utf8.ValidString(r) {
			return false
		}
	}
	return true
}

// uvarint decodes a binary.AppendUvarint number from the start of s without converting s to a
// byte slice; the encodings it reads are only ever made by NewMembership.
func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < 0x80 {
			return x | uint64(b)<<shift, i + 1
		}
		x |= uint64(b&0x7f) << shift
		shift += 7
	}
	return x, len(s)
}
