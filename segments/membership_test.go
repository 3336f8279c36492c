package segments

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMembership(t *testing.T) {
	tests := []struct {
		name               string
		included, excluded []string
		want               map[string]bool
	}{
		{"none", nil, nil, map[string]bool{}},
		{"included and excluded", []string{"b.g1", "a.g1"}, []string{"c.g2"}, map[string]bool{"a.g1": true, "b.g1": true, "c.g2": false}},
		{"included wins", []string{"x.g1"}, []string{"x.g1"}, map[string]bool{"x.g1": true}},
		{"included wins whatever the order", nil, []string{"x.g1", "x.g1"}, map[string]bool{"x.g1": false}},
		{"duplicates", []string{"a", "a"}, nil, map[string]bool{"a": true}},
		{"opaque refs", []string{"", "\x00\xff", "long " + string(make([]byte, 300))}, nil,
			map[string]bool{"": true, "\x00\xff": true, "long " + string(make([]byte, 300)): true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMembership(tt.included, tt.excluded)
			if diff := cmp.Diff(tt.want, mapOf(m)); diff != "" {
				t.Errorf("Map (-want +got):\n%s", diff)
			}
			if m.Len() != len(tt.want) || (m == Membership{}) != (len(tt.want) == 0) {
				t.Errorf("Len = %d, zero = %v for %d refs", m.Len(), m == Membership{}, len(tt.want))
			}
			var refs []string
			for r := range m.All() {
				refs = append(refs, r)
			}
			if !slices.IsSorted(refs) {
				t.Errorf("All is not in order: %q", refs)
			}
		})
	}
}

func TestMembershipInterned(t *testing.T) {
	a := NewMembership([]string{"a.g1", "b.g1"}, []string{"c.g1"})
	b := NewMembership([]string{"b.g1", "a.g1"}, []string{"c.g1", "a.g1"})
	if a != b {
		t.Error("equal sets given in different orders are different values")
	}
	if a == NewMembership([]string{"a.g1"}, nil) {
		t.Error("different sets are equal")
	}
	if NewMembership(nil, nil) != (Membership{}) {
		t.Error("empty membership is not the zero value")
	}
}

// mapOf is m as a map of ref to included.
func mapOf(m Membership) map[string]bool {
	out := make(map[string]bool)
	for r, inc := range m.All() {
		out[r] = inc
	}
	return out
}
