package inventory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bigseg/bigseg/segments"
)

// Scanner is a store that can list every context it holds, for the inventory.
type Scanner interface {
	// Scan calls each once for every context stored (its hash and both its sets), a page of
	// reads at a time, holding no connection while each runs. After each request that walks the
	// store (a Redis SCAN reply, a DynamoDB Query page), before each is called for its contexts,
	// it calls walked with how many keys or items the request stepped over that are not
	// contexts it emits (another prefix's, other data, a context's second key): what the
	// scan's pace counts besides the contexts. It stops at the first error of either.
	Scan(ctx context.Context, walked func(skipped int) error, each func(hash string, m segments.Membership) error) error
}

// callTimeout bounds each call the inventory makes outside a scan's pages (a metadata read, a
// lease, a save or a load of the stored result); the pages are bounded by the store itself.
const callTimeout = 10 * time.Second

// tally counts one scan: per ref, the contexts that include it and those that exclude it, and
// the contexts seen. It grows with the refs found, never with the contexts.
type tally struct {
	refs     map[string]*[2]int64 // ref -> included, excluded
	contexts int64
}

// add counts one context. A Membership holds a ref once, included if it was in both sets, so
// a context in both sets of a ref counts as included only, as a lookup answers.
func (t *tally) add(m segments.Membership) {
	t.contexts++
	for ref, included := range m.All() {
		c := t.refs[ref]
		if c == nil {
			// The ref is a slice of the membership's interned encoding: a copy keeps only its bytes.
			c = new([2]int64)
			t.refs[strings.Clone(ref)] = c
		}
		if included {
			c[0]++
		} else {
			c[1]++
		}
	}
}

// segments returns the counts, most contexts first (then by ref, for a stable order).
func (t *tally) segments() []segments.SegmentCount {
	out := make([]segments.SegmentCount, 0, len(t.refs))
	for ref, c := range t.refs {
		out = append(out, segments.SegmentCount{Ref: ref, Included: c[0], Excluded: c[1]})
	}
	slices.SortFunc(out, func(a, b segments.SegmentCount) int {
		return cmp.Or(cmp.Compare(b.Included+b.Excluded, a.Included+a.Excluded), strings.Compare(a.Ref, b.Ref))
	})
	return out
}

// shrunk counts the segments of prev that lost more than half their contexts in next (a ref no
// longer found lost them all), so that an alert sees it whether or not the segment is exported.
func shrunk(prev, next []segments.SegmentCount) int {
	now := make(map[string]int64, len(next))
	for _, s := range next {
		now[s.Ref] = s.Included + s.Excluded
	}
	n := 0
	for _, s := range prev {
		if was := s.Included + s.Excluded; was > 0 && 2*now[s.Ref] < was {
			n++
		}
	}
	return n
}

// pacer holds a scan to a rate of reads per second: a context read counts one, and so does
// each key or item a request of the walk stepped over (one at least a request). After the nth
// read it waits until n per-rate intervals have passed since the start, so the store is read
// at most rate a second on average (plus the page under way), and a late wake-up is caught
// up, not lost. It sleeps only when minSleep or more ahead: a wake-up per context cost 4-5
// times the CPU of the scan itself at 1,000 a second (BENCHMARKS.md, "Inventory scan"). It
// calls keep (if not nil) after every wait, and between sleeps of at most maxSleep, so that a
// long wait (a SCAN reply that stepped over 100 keys at a low rate) does not outlast a lease.
type pacer struct {
	rate  int64 // reads per second; 0 or less: no limit
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
	keep  func(context.Context) error
	start time.Time
	n     int64
}

// wait counts reads more reads, and waits until the rate allows them.
func (p *pacer) wait(ctx context.Context, reads int64) error {
	p.n += reads
	if p.rate > 0 {
		// Rounded up, so that the nth read is never let through a nanosecond early.
		due := p.start.Add(time.Duration((p.n*int64(time.Second) + p.rate - 1) / p.rate))
		for d := due.Sub(p.now()); d >= minSleep; d = due.Sub(p.now()) {
			if err := p.sleep(ctx, min(d, maxSleep)); err != nil {
				return err
			}
			if err := p.hold(ctx); err != nil {
				return err
			}
		}
	}
	return p.hold(ctx)
}

func (p *pacer) hold(ctx context.Context) error {
	if p.keep == nil {
		return nil
	}
	return p.keep(ctx)
}

// minSleep is the least a pacer sleeps: it lets a scan run that far ahead of its rate. maxSleep
// is the most it sleeps between two calls of keep.
const (
	minSleep = 10 * time.Millisecond
	maxSleep = 250 * time.Millisecond
)

// sleep waits d, or less if ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clock is the time a scan reads and waits on: the real one, or a test's.
type clock struct {
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

var realClock = clock{now: time.Now, sleep: sleep}

// scan counts every context of env's store at most rate reads a second (pacer), calling
// progress (if not nil) with the contexts read so far after each, and keep (if not nil) after
// every read and between long sleeps (pacer): its error stops the scan. The result is complete, with the store's cursor at
// its start and finish; its Segments are every ref found.
func scan(ctx context.Context, env *segments.Environment, sc Scanner, rate int, c clock, progress func(int64),
	keep func(context.Context) error) (segments.Inventory, error) {
	inv := segments.Inventory{StartedAt: c.now()}
	var err error
	if inv.CursorStart, err = cursor(ctx, env); err != nil {
		return inv, err
	}
	t := tally{refs: map[string]*[2]int64{}}
	p := pacer{rate: int64(rate), now: c.now, sleep: c.sleep, keep: keep, start: inv.StartedAt}
	err = sc.Scan(ctx, func(skipped int) error { return p.wait(ctx, max(1, int64(skipped))) }, func(_ string, m segments.Membership) error {
		t.add(m)
		if progress != nil {
			progress(t.contexts)
		}
		return p.wait(ctx, 1)
	})
	if err != nil {
		return inv, fmt.Errorf("scan after %d contexts: %w", t.contexts, err)
	}
	if inv.CursorFinish, err = cursor(ctx, env); err != nil {
		return inv, err
	}
	inv.State, inv.Contexts, inv.Segments, inv.FinishedAt = segments.ScanComplete, t.contexts, t.segments(), c.now()
	return inv, nil
}

// cursor is the store's cursor, read from its metadata (bounded by callTimeout): a scan reads
// it at its start and finish, and two that differ mean the data changed while it ran. It is
// not the status poller's, which may be a poll interval old.
func cursor(ctx context.Context, env *segments.Environment) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	md, err := env.Store.Metadata(ctx)
	if err != nil {
		return "", fmt.Errorf("read the cursor: %w", err)
	}
	return md.Cursor, nil
}
