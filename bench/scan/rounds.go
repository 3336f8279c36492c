package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// roundResult is one server's round: per kind of lookup (hot, cold), the server's CPU per
// request and the latencies.
type roundResult struct {
	scanning bool
	cpu      [2]time.Duration // per request: hot, cold
	load     [2]loadResult
	rss      int64
	state    string // the inventory's at the round's end
}

// rounds runs -rounds pairs of rounds, a server scanning at scanRate and one that does not, in
// alternating order, and prints each round and the ratios' medians.
func (b *bench) rounds(ctx context.Context, scanRate int) error {
	fmt.Printf("## lookups during a scan at %d contexts/s against without: %d lookups/s, %s hot then %s cold a round\n",
		scanRate, b.o.rate, b.o.round, b.o.round)
	fmt.Println("| round | server | hot CPU/req | hot p50 | hot p99 | cold CPU/req | cold p50 | cold p99 | RSS | inventory |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	var ratios [2][3][]float64 // hot, cold: CPU per request, p50, p99
	for r := range b.o.rounds {
		var pair [2]roundResult // no scan, scan
		for i := range 2 {
			scanning := (i+r)%2 == 1
			res, err := b.round(ctx, scanning, scanRate)
			if err != nil {
				return err
			}
			pair[btoi(scanning)] = res
			fmt.Printf("| %d | %s | %.1f µs | %s | %s | %.1f µs | %s | %s | %.1f MiB | %s |\n", r+1, map[bool]string{true: "scanning", false: "not scanning"}[scanning],
				micros(res.cpu[0]), ms(res.load[0].p50), ms(res.load[0].p99), micros(res.cpu[1]), ms(res.load[1].p50), ms(res.load[1].p99), mib(res.rss), res.state)
		}
		for k := range 2 {
			ratios[k][0] = append(ratios[k][0], float64(pair[1].cpu[k])/float64(pair[0].cpu[k]))
			ratios[k][1] = append(ratios[k][1], float64(pair[1].load[k].p50)/float64(pair[0].load[k].p50))
			ratios[k][2] = append(ratios[k][2], float64(pair[1].load[k].p99)/float64(pair[0].load[k].p99))
		}
	}
	for k, name := range []string{"hot", "cold"} {
		for f, figure := range []string{"server CPU per request", "latency p50", "latency p99"} {
			xs := slices.Sorted(slices.Values(ratios[k][f]))
			fmt.Printf("%s: %s, scanning over not: median %.3f (rounds %.3f-%.3f)\n", name, figure, xs[len(xs)/2], xs[0], xs[len(xs)-1])
		}
	}
	fmt.Println()
	return nil
}

// round starts a server (scanning or not), warms the hot keys, and measures hot then cold
// lookups at the fixed rate.
func (b *bench) round(ctx context.Context, scanning bool, scanRate int) (roundResult, error) {
	res := roundResult{scanning: scanning}
	var interval time.Duration
	if scanning {
		interval = time.Second // scans back to back: a fast one ends before the round does
		if err := resetLease(ctx, b.redis); err != nil {
			return res, err
		}
	}
	s, err := startServer(ctx, b.o.server, b.o.serverCPUs, b.url(), interval, scanRate)
	if err != nil {
		return res, err
	}
	defer s.stop()
	hot := func(r *rand.Rand) int { return r.IntN(1000) }
	next := 0 // every hot key cached, in turn, on one connection
	if _, err := paced(s.addr, 4000, 1, 300*time.Millisecond, func(*rand.Rand) int { next++; return next % 1000 }); err != nil {
		return res, err
	}
	cold := func(r *rand.Rand) int { return r.IntN(b.o.contexts) }
	for k, key := range []func(*rand.Rand) int{hot, cold} {
		before, err := cpuTime(s.pid())
		if err != nil {
			return res, err
		}
		if res.load[k], err = paced(s.addr, b.o.rate, 8, b.o.round, key); err != nil {
			return res, err
		}
		after, err := cpuTime(s.pid())
		if err != nil {
			return res, err
		}
		res.cpu[k] = (after - before) / time.Duration(res.load[k].requests)
	}
	if res.rss, err = rss(s.pid()); err != nil {
		return res, err
	}
	inv, err := s.inventory(ctx)
	res.state = inv.Scan.State
	return res, err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
