package main

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The population has every combination of states, and the flag's answers all occur.
func TestPopulationCoversEveryCase(t *testing.T) {
	pop := population(640)
	combos, answers := map[member]bool{}, map[string]int{}
	for _, m := range pop {
		m.key = ""
		combos[m] = true
		answers[m.want()]++
	}
	if len(combos) != 128 {
		t.Errorf("%d combinations, want 128", len(combos))
	}
	for _, v := range []string{"blocked", "beta", "vip", "everyone-else"} {
		if answers[v] == 0 {
			t.Errorf("no context answers %q: %v", v, answers)
		}
	}
	keys := map[string]bool{}
	for _, m := range patched(pop, 40) {
		if keys[m.key] {
			t.Errorf("key %q twice", m.key)
		}
		keys[m.key] = true
	}
}

// Applying a patch's changes to the sets before it gives the sets after it, set by set.
func TestChangesApplied(t *testing.T) {
	before := population(300)
	after := patched(before, 20)
	type sets struct{ inc, exc []string }
	got := map[string]sets{}
	for _, m := range before {
		inc, exc := m.sets()
		got[contextHash(m.key)] = sets{inc, exc}
	}
	apply := func(set, add, remove []string) []string {
		out := slices.DeleteFunc(slices.Clone(set), func(r string) bool { return slices.Contains(remove, r) })
		return append(out, minus(add, out)...)
	}
	for _, ch := range changes(before, after) {
		s := got[ch.hash]
		got[ch.hash] = sets{apply(s.inc, ch.addIncluded, ch.removeIncluded), apply(s.exc, ch.addExcluded, ch.removeExcluded)}
	}
	for _, m := range after {
		inc, exc := m.sets()
		g := got[contextHash(m.key)]
		slices.Sort(inc)
		slices.Sort(exc)
		slices.Sort(g.inc)
		slices.Sort(g.exc)
		if diff := cmp.Diff(sets{inc, exc}, g, cmp.AllowUnexported(sets{}), cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", m.key, diff)
		}
	}
}
