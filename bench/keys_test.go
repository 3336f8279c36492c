package main

import "testing"

func TestMembershipSets(t *testing.T) {
	sets := membershipSets()
	seen := map[string]bool{}
	for i, s := range sets {
		if n := len(s[0]) + len(s[1]); n != 3+i%2 {
			t.Errorf("set %d has %d refs, want %d", i, n, 3+i%2)
		}
		seen[fmtSet(s)] = true
	}
	if len(seen) != distinctSets {
		t.Errorf("only %d distinct sets of %d", len(seen), distinctSets)
	}
}

func fmtSet(s [2][]string) string {
	out := ""
	for _, r := range s[0] {
		out += "+" + r
	}
	for _, r := range s[1] {
		out += "-" + r
	}
	return out
}
