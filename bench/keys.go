package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// The data layout is LaunchDarkly's, under its default prefix, as the Relay Proxy writes it.
const (
	prefix         = "launchdarkly"
	syncedOnKey    = prefix + ":big_segments_synchronized_on"
	cursorKey      = prefix + ":big_segments_cursor"
	includePrefix  = prefix + ":big_segment_include:"
	excludePrefix  = prefix + ":big_segment_exclude:"
	distinctSets   = 500
	hotKeys        = 1000 // contexts user-0 … user-999 make the hot scenario
	batchSize      = 100
	stormCalls     = 1000
	zipfExponent   = 1.0
	zipfSeed       = 20261130
	relayIdleEvery = 30 // seconds between the Relay Proxy's synchronized_on refreshes while idle
)

// contextKey is the key of the i-th seeded context.
func contextKey(i int) string { return "user-" + strconv.Itoa(i) }

// stormKey is the key of the i-th context seeded for the storm scenario alone: no load ever
// asks for it, so it is uncached whatever the cache keeps and for how long.
func stormKey(i int) string { return "storm-" + strconv.Itoa(i) }

// stormContexts is how many storm contexts are seeded: one per bigseg variant (this tree's
// and the baseline's).
const stormContexts = 2

// membershipSets are the distinct sets the seeded contexts are given: 3 or 4 refs each from a
// pool of 60 (30 segments, 2 generations each), about a third of them excluded, drawn with a
// fixed seed (real data repeats sets heavily). Each set is {included, excluded}.
func membershipSets() [distinctSets][2][]string {
	var sets [distinctSets][2][]string
	rnd := rand.New(rand.NewPCG(distinctSets, 60))
	for i := range sets {
		for _, r := range rnd.Perm(60)[:3+i%2] {
			ref := fmt.Sprintf("segment-%02d.g%d", r%30, 1+r/30)
			if rnd.IntN(3) == 0 {
				sets[i][1] = append(sets[i][1], ref)
			} else {
				sets[i][0] = append(sets[i][0], ref)
			}
		}
	}
	return sets
}

// setOf is the index of context i's set.
func setOf(i int) int { return (i * 7919) % distinctSets }
