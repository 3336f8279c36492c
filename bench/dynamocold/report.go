package main

import (
	"fmt"
	"io"
	"sort"
)

// printRound prints a round's figures, a line a system.
func printRound(w io.Writer, r int, systems []*system, row []result) {
	fmt.Fprintf(w, "round %d\n", r)
	for i, s := range systems {
		x, name := row[i], s.name
		fmt.Fprintf(w, "  %-16s %8.0f lookups/s  server %7.1f µs/lookup  moto %7.1f µs/lookup  %7.1f calls %7.1f items per 1,000 lookups  %v  (%d lookups, %d not 200)\n",
			name, x.perSecond(), x.perLookup(x.serverCPU), x.perLookup(x.motoCPU),
			x.perThousand(x.dynamo.total()), x.perThousand(x.dynamo.items), x.dynamo.calls, x.lookups, x.errors)
	}
}

// printSummary prints, for every system, the median and range over the rounds of each figure,
// then each system's ratios to the last one (the GetItem baseline), round by round.
func printSummary(w io.Writer, systems []*system, rounds [][]result) {
	figures := []struct {
		name string
		f    func(result) float64
	}{
		{"lookups/s", result.perSecond},
		{"server CPU µs/lookup", func(r result) float64 { return r.perLookup(r.serverCPU) }},
		{"moto CPU µs/lookup", func(r result) float64 { return r.perLookup(r.motoCPU) }},
		{"DynamoDB calls/1,000 lookups", func(r result) float64 { return r.perThousand(r.dynamo.total()) }},
		{"items asked/1,000 lookups", func(r result) float64 { return r.perThousand(r.dynamo.items) }},
	}
	fmt.Fprintf(w, "\nmedian (range) over %d rounds\n", len(rounds))
	for i, s := range systems {
		fmt.Fprintf(w, "  %s\n", s.name)
		for _, fg := range figures {
			fmt.Fprintf(w, "    %-30s %s\n", fg.name, spread(rounds, func(row []result) float64 { return fg.f(row[i]) }))
		}
	}
	base := len(systems) - 1
	fmt.Fprintf(w, "\nratios to %s, median (range) of the rounds' own ratios\n", systems[base].name)
	for i, s := range systems[:base] {
		fmt.Fprintf(w, "  %s\n", s.name)
		for _, fg := range figures {
			fmt.Fprintf(w, "    %-30s %s\n", fg.name, spread(rounds, func(row []result) float64 { return fg.f(row[i]) / fg.f(row[base]) }))
		}
	}
}

// spread is the median and range of f over the rounds.
func spread(rounds [][]result, f func([]result) float64) string {
	xs := make([]float64, len(rounds))
	for i, row := range rounds {
		xs[i] = f(row)
	}
	sort.Float64s(xs)
	n := len(xs)
	med := xs[n/2]
	if n%2 == 0 {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	return fmt.Sprintf("%10.3f (%.3f-%.3f)", med, xs[0], xs[n-1])
}
