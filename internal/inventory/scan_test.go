package inventory

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/segments"
)

func TestCounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		members  []segments.Membership
		contexts int64
		want     []segments.SegmentCount
	}{
		{"none", nil, 0, []segments.SegmentCount{}},
		{"a context without membership is a context", []segments.Membership{{}}, 1, []segments.SegmentCount{}},
		{"included and excluded, largest first", []segments.Membership{
			segments.NewMembership([]string{"a.g1", "b.g1"}, nil),
			segments.NewMembership([]string{"b.g1"}, []string{"c.g2"}),
			segments.NewMembership(nil, []string{"b.g1", "c.g2"}),
		}, 3, []segments.SegmentCount{{Ref: "b.g1", Included: 2, Excluded: 1}, {Ref: "c.g2", Excluded: 2}, {Ref: "a.g1", Included: 1}}},
		{"both sets of one ref: included only", []segments.Membership{
			segments.NewMembership([]string{"a.g1"}, []string{"a.g1", "b.g1"}),
			segments.NewMembership(nil, []string{"a.g1"}),
		}, 2, []segments.SegmentCount{{Ref: "a.g1", Included: 1, Excluded: 1}, {Ref: "b.g1", Excluded: 1}}},
		{"equal counts by ref", []segments.Membership{
			segments.NewMembership([]string{"z"}, []string{"y"}),
		}, 1, []segments.SegmentCount{{Ref: "y", Excluded: 1}, {Ref: "z", Included: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &fakeStore{members: tc.members, cursor: "c1"}
			env := environment(t, "production", store)
			inv, err := scan(t.Context(), env, store, 0, newFakeClock().clock(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if inv.Contexts != tc.contexts || inv.State != segments.ScanComplete || inv.CursorStart != "c1" || inv.CursorFinish != "c1" {
				t.Errorf("scan: %d contexts, state %s, cursors %q %q; want %d, complete, c1 c1", inv.Contexts, inv.State, inv.CursorStart, inv.CursorFinish, tc.contexts)
			}
			if d := cmp.Diff(tc.want, inv.Segments); d != "" {
				t.Errorf("segments (-want +got):\n%s", d)
			}
		})
	}
}

// TestCursorsAtStartAndFinish: a scan during which the data changed says so.
func TestCursorsAtStartAndFinish(t *testing.T) {
	store := &fakeStore{members: members(3, "a"), cursor: "c1"}
	store.before = func(n int) {
		if n == 1 {
			store.cursor = "c2" // Scan holds no lock while each runs
		}
	}
	inv, err := scan(t.Context(), environment(t, "production", store), store, 0, newFakeClock().clock(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if inv.CursorStart != "c1" || inv.CursorFinish != "c2" {
		t.Errorf("cursors %q to %q, want c1 to c2", inv.CursorStart, inv.CursorFinish)
	}
}

// TestRateLimitHolds reads 1,000 contexts at 100 a second on a clock whose sleeps pass at
// once: at no point have more contexts been read than the rate allows since the start (the
// one being given to each aside), and the scan takes no longer than it must.
func TestRateLimitHolds(t *testing.T) {
	const n, perSecond = 1000, 100
	fc := newFakeClock()
	start := fc.t
	store := &fakeStore{members: members(n, "a")}
	store.before = func(i int) {
		allowed := perSecond*int64(fc.t.Sub(start))/int64(time.Second) + 1
		if int64(i+1) > allowed {
			t.Fatalf("context %d read %v after the start: over %d a second", i+1, fc.t.Sub(start), perSecond)
		}
	}
	inv, err := scan(t.Context(), environment(t, "production", store), store, perSecond, fc.clock(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	took := inv.FinishedAt.Sub(inv.StartedAt)
	t.Logf("%d contexts in %v: %.1f a second", inv.Contexts, took, float64(inv.Contexts)/took.Seconds())
	if want := n / perSecond * time.Second; took < want || took > want+time.Millisecond {
		t.Errorf("the scan took %v, want %v", took, want)
	}
}

// At a high rate the pacer sleeps once per minSleep of contexts, not once a context, and the
// scan is never further ahead of its rate than minSleep.
func TestRateLimitSleepsInSteps(t *testing.T) {
	const n, perSecond = 5000, 1000
	fc := newFakeClock()
	start, sleeps := fc.t, 0
	store := &fakeStore{members: members(n, "a")}
	store.before = func(i int) {
		allowed := perSecond*int64(fc.t.Sub(start)+minSleep)/int64(time.Second) + 1
		if int64(i+1) > allowed {
			t.Fatalf("context %d read %v after the start: over %d a second", i+1, fc.t.Sub(start), perSecond)
		}
	}
	c := fc.clock()
	sleep := c.sleep
	c.sleep = func(ctx context.Context, d time.Duration) error { sleeps++; return sleep(ctx, d) }
	if _, err := scan(t.Context(), environment(t, "production", store), store, perSecond, c, nil, nil); err != nil {
		t.Fatal(err)
	}
	if want := n / int(perSecond*minSleep/time.Second); sleeps > want+1 { // one per 10 contexts here
		t.Errorf("%d sleeps for %d contexts at %d a second, want at most %d", sleeps, n, perSecond, want+1)
	}
}

// TestNoLimitNeverSleeps: ReadsPerSecond 0 reads as fast as the store answers.
func TestNoLimitNeverSleeps(t *testing.T) {
	store := &fakeStore{members: members(100, "a")}
	c := clock{now: time.Now, sleep: func(context.Context, time.Duration) error {
		t.Fatal("slept without a limit")
		return nil
	}}
	if _, err := scan(t.Context(), environment(t, "production", store), store, 0, c, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestShrunk(t *testing.T) {
	prev := []segments.SegmentCount{{Ref: "half", Included: 10}, {Ref: "over-half", Included: 6, Excluded: 5},
		{Ref: "gone", Excluded: 1}, {Ref: "grew", Included: 1}, {Ref: "empty"}}
	next := []segments.SegmentCount{{Ref: "half", Included: 5}, {Ref: "over-half", Included: 5}, {Ref: "grew", Included: 9},
		{Ref: "new", Included: 1}}
	if got := shrunk(prev, next); got != 2 {
		t.Errorf("shrunk = %d, want 2 (over-half and gone; half lost exactly half)", got)
	}
}

// A long wait (a SCAN reply that stepped over 100 keys, at 1 read a second) sleeps in steps of
// at most maxSleep and calls keep between them, so that it never outlasts the scan's lease.
func TestLongWaitKeepsBetweenSleeps(t *testing.T) {
	fc := newFakeClock()
	c := fc.clock()
	start, longest, sleeps, keeps := fc.t, time.Duration(0), 0, 0
	p := pacer{rate: 1, now: c.now, start: start,
		sleep: func(ctx context.Context, d time.Duration) error {
			sleeps, longest = sleeps+1, max(longest, d)
			return c.sleep(ctx, d)
		},
		keep: func(context.Context) error { keeps++; return nil }}
	if err := p.wait(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	if took := fc.t.Sub(start); took != 100*time.Second || longest > maxSleep || keeps != sleeps+1 {
		t.Errorf("waited %v in %d sleeps (the longest %v) with %d keeps; want 100s, none over %v, a keep after each and at the end",
			took, sleeps, longest, keeps, maxSleep)
	}
}
