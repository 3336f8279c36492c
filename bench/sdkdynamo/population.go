package main

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strconv"

	"github.com/launchdarkly/go-sdk-common/v3/ldcontext"
)

// The flag the SDK evaluates (from a file): three rules, one per Big Segment, first match
// wins, else the fallthrough. Each segment also has a rule of its own (plan "gold"), so that a
// context's exclusion shows: an excluded gold context is not in it, a gold context of no set is.
const (
	flagKey  = "checkout"
	flagData = `{
  "flags": {"checkout": {"key": "checkout", "version": 1, "on": true, "salt": "f",
    "variations": ["blocked", "beta", "vip", "everyone-else"], "offVariation": 3, "fallthrough": {"variation": 3},
    "rules": [
      {"id": "blocked", "variation": 0, "clauses": [{"attribute": "key", "op": "segmentMatch", "values": ["blocked"]}]},
      {"id": "beta", "variation": 1, "clauses": [{"attribute": "key", "op": "segmentMatch", "values": ["beta-testers"]}]},
      {"id": "vip", "variation": 2, "clauses": [{"attribute": "key", "op": "segmentMatch", "values": ["vip"]}]}]}},
  "segments": {
    "blocked": {"key": "blocked", "version": 1, "salt": "a", "unbounded": true, "generation": 2,
      "rules": [{"id": "g", "clauses": [{"attribute": "plan", "op": "in", "values": ["gold"]}]}]},
    "beta-testers": {"key": "beta-testers", "version": 1, "salt": "b", "unbounded": true, "generation": 3,
      "rules": [{"id": "g", "clauses": [{"attribute": "plan", "op": "in", "values": ["gold"]}]}]},
    "vip": {"key": "vip", "version": 1, "salt": "c", "unbounded": true, "generation": 1,
      "rules": [{"id": "g", "clauses": [{"attribute": "plan", "op": "in", "values": ["gold"]}]}]}
  }
}`
)

// segments are the flag's Big Segments in the order of its rules, with their variations.
var segments = []struct{ ref, variation string }{
	{"blocked.g2", "blocked"},
	{"beta-testers.g3", "beta"},
	{"vip.g1", "vip"},
}

// Refs in the data that no rule of the flag matches: another segment, and an older generation
// of one of the flag's (a context in it is not in the current one).
const (
	otherRef = "newsletter.g1"
	oldRef   = "beta-testers.g2"
)

// state is a context's place in one segment's data.
type state uint8

const (
	none state = iota
	included
	excluded
	both // in both sets: the SDK's rule is that inclusion wins
)

// member is a context of the population and its data.
type member struct {
	key    string
	gold   bool
	states [3]state // by segments' index
	other  bool     // included in otherRef and oldRef too
}

func (m member) context() ldcontext.Context {
	b := ldcontext.NewBuilder(m.key)
	if m.gold {
		b.SetString("plan", "gold")
	}
	return b.Build()
}

// want is the variation the flag must answer for m, by the rules above, worked out here
// apart from the SDK.
func (m member) want() string {
	for i, s := range segments {
		switch m.states[i] {
		case included, both:
			return s.variation
		case none:
			if m.gold {
				return s.variation
			}
		}
	}
	return "everyone-else"
}

// sets are m's included and excluded refs.
func (m member) sets() (inc, exc []string) {
	for i, s := range segments {
		if m.states[i] == included || m.states[i] == both {
			inc = append(inc, s.ref)
		}
		if m.states[i] == excluded || m.states[i] == both {
			exc = append(exc, s.ref)
		}
	}
	if m.other {
		inc = append(inc, otherRef, oldRef)
	}
	return inc, exc
}

// population is n contexts covering every combination of the three segments' states, gold
// or not, and the other refs (128 combinations; n of at least 128 has each).
func population(n int) []member {
	ms := make([]member, n)
	for i := range ms {
		c := i % 128
		ms[i] = member{key: "user-" + strconv.Itoa(i), gold: c&1 == 1, other: c&2 == 2,
			states: [3]state{state(c >> 2 & 3), state(c >> 4 & 3), state(c >> 6 & 3)}}
	}
	// Keys of every shape: the store sees only hashes, but the SDK hashes the key's bytes.
	for i, k := range []string{"ünïcødé", "a/b%2F c+d", "user-2 "} {
		if i < len(ms) {
			ms[i].key = k
		}
	}
	return ms
}

// patched is pop after the patch the tests and the benchmark apply: every fifth context's
// states move on (none, included, excluded, both, none) and its other refs flip, and extra
// new contexts appear.
func patched(pop []member, extra int) []member {
	out := slices.Clone(pop)
	for i := 0; i < len(out); i += 5 {
		for s := range out[i].states {
			out[i].states[s] = (out[i].states[s] + 1) % 4
		}
		out[i].other = !out[i].other
	}
	for _, m := range population(len(pop) + extra)[len(pop):] {
		m.states[1] = included // so that every new one has data
		out = append(out, m)
	}
	return out
}

// changes are what a patch must write to go from before to after (contexts of after beyond
// before's length are new).
func changes(before, after []member) []change {
	var chs []change
	for i, m := range after {
		var oldInc, oldExc []string
		if i < len(before) {
			oldInc, oldExc = before[i].sets()
		}
		inc, exc := m.sets()
		ch := change{hash: contextHash(m.key),
			addIncluded: minus(inc, oldInc), addExcluded: minus(exc, oldExc),
			removeIncluded: minus(oldInc, inc), removeExcluded: minus(oldExc, exc)}
		if len(ch.addIncluded)+len(ch.addExcluded)+len(ch.removeIncluded)+len(ch.removeExcluded) > 0 {
			chs = append(chs, ch)
		}
	}
	return chs
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// contextHash is a context key's hash in the Big Segments data: base64 of its SHA-256.
func contextHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.StdEncoding.EncodeToString(sum[:])
}
