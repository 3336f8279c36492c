package main

import "testing"

func TestHashKeyAsLaunchDarkly(t *testing.T) {
	// From bigseg's README, which matches the SDKs.
	if got, want := hashKey("alice"), "K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA="; got != want {
		t.Errorf("hashKey(alice) = %s, want %s", got, want)
	}
}

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
