package segments

import (
	"cmp"
	"encoding/binary"
	"iter"
	"slices"
	"strings"
	"unicode/utf8"
	"unique"
)

// Membership is the set of Big Segment refs (such as "beta-users.g3") that a context is
// included in or excluded from; the zero value is "no membership". Identical sets share one
// interned encoding, so a cache holds each distinct set once.
type Membership struct {
	h unique.Handle[string]
}

// NewMembership returns the membership with the given refs. A ref listed as both included and
// excluded is included, as in the SDKs.
func NewMembership(included, excluded []string) Membership {
	if len(included)+len(excluded) == 0 {
		return Membership{}
	}
	type entry struct {
		ref  string
		flag byte // '+' included, '-' excluded: '+' sorts first
	}
	entries, size := make([]entry, 0, len(included)+len(excluded)), 0
	for i, refs := range [][]string{included, excluded} {
		for _, r := range refs {
			entries = append(entries, entry{r, "+-"[i]})
			size += 1 + binary.MaxVarintLen64 + len(r)
		}
	}
	// By ref, included first: the first of each run of equal refs is the one that counts.
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Or(strings.Compare(a.ref, b.ref), cmp.Compare(a.flag, b.flag)) })
	buf := make([]byte, 0, size)
	for i, e := range entries {
		if i == 0 || entries[i-1].ref != e.ref {
			buf = binary.AppendUvarint(append(buf, e.flag), uint64(len(e.ref)))
			buf = append(buf, e.ref...)
		}
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
// the refs, so that encoders get a stable order without sorting.
func (m Membership) All() iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		for s := m.encoded(); len(s) > 0; {
			n, w := uvarint(s[1:])
			ref, included := s[1+w:1+w+int(n)], s[0] == '+'
			s = s[1+w+int(n):]
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

// uvarint is binary.Uvarint of a string, which it does not copy.
func uvarint(s string) (x uint64, n int) {
	for shift := uint(0); n < len(s); shift += 7 {
		b := s[n]
		n++
		if x |= uint64(b&0x7f) << shift; b < 0x80 {
			return x, n
		}
	}
	return x, n
}
