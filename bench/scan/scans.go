package main

import (
	"context"
	"fmt"
	"time"
)

// full measures a whole scan at -full-rate, from the server's start to its first scan's end.
func (b *bench) full(ctx context.Context) error {
	idle, rest, err := b.idle(ctx)
	if err != nil {
		return err
	}
	if err := resetLease(ctx, b.redis); err != nil {
		return err
	}
	from, err := b.snapRedis(ctx) // the server's CPU is counted from its start
	if err != nil {
		return err
	}
	s, err := startServer(ctx, b.o.server, b.o.serverCPUs, b.url(), time.Hour, b.o.fullRate)
	if err != nil {
		return err
	}
	defer s.stop()
	started := time.Now()
	var peak int64
	for {
		if r, err := rss(s.pid()); err == nil {
			peak = max(peak, r)
		}
		inv, err := s.inventory(ctx)
		if err != nil {
			return err
		}
		if time.Since(started) > 30*time.Minute {
			return fmt.Errorf("the scan did not end in 30 minutes")
		}
		if inv.Scan.LastError != "" {
			fmt.Printf("## full scan, BIGSEG_INVENTORY_READS_PER_SECOND=%d: FAILED after %.1f s: %s\n\n",
				b.o.fullRate, time.Since(started).Seconds(), inv.Scan.LastError)
			return nil
		}
		if inv.Scan.State == "complete" {
			to, err := b.snap(ctx, s)
			if err != nil {
				return err
			}
			report(fmt.Sprintf("full scan, BIGSEG_INVENTORY_READS_PER_SECOND=%d (server CPU from its start)", b.o.fullRate),
				inv.Contexts, inv.Scan.FinishedAt.Sub(inv.Scan.StartedAt), from, to, peak, idle, rest)
			fmt.Printf("contexts counted %d of %d written, segments %d of %d; RSS after the scan: %.1f MiB\n\n",
				inv.Contexts, b.o.contexts, len(inv.Segments), b.o.segments, mib(to.serverRSS))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sample measures a scan at the default rate over -sample, from 5 s after the server's start.
func (b *bench) sample(ctx context.Context) error {
	idle, rest, err := b.idle(ctx)
	if err != nil {
		return err
	}
	if err := resetLease(ctx, b.redis); err != nil {
		return err
	}
	s, err := startServer(ctx, b.o.server, b.o.serverCPUs, b.url(), time.Hour, 1000)
	if err != nil {
		return err
	}
	defer s.stop()
	time.Sleep(5 * time.Second)
	from, err := b.snap(ctx, s)
	if err != nil {
		return err
	}
	peak := from.serverRSS
	for end := time.Now().Add(b.o.sample); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if r, err := rss(s.pid()); err == nil {
			peak = max(peak, r)
		}
	}
	to, err := b.snap(ctx, s)
	if err != nil {
		return err
	}
	inv, err := s.inventory(ctx)
	if err != nil || inv.Scan.State != "running" {
		return fmt.Errorf("the scan is not running at the sample's end (%q, %v)", inv.Scan.State, err)
	}
	n := (to.commands["smembers"] - from.commands["smembers"]) / 2
	report(fmt.Sprintf("sample of a scan at the default 1,000 contexts/s, over %s", b.o.sample), n, to.at.Sub(from.at), from, to, peak, idle, rest)
	return nil
}
