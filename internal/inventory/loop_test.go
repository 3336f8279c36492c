package inventory

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
)

var _ Observer = (*metrics.Inventory)(nil)

const interval = time.Hour

// newLoop returns a loop over envs on fc's clock, logging to logs.
func newLoop(fc *fakeClock, logs *bytes.Buffer, obs Observer, envs ...*segments.Environment) *Loop {
	l := New(envs, Settings{Interval: interval}, slog.New(slog.NewTextHandler(logs, nil)), obs)
	l.clock = fc.clock()
	return l
}

// TestStates: while a scan runs, the environment says running and keeps the last complete
// counts; after, complete with the new ones; the observer hears of complete ones only.
func TestStates(t *testing.T) {
	fc := newFakeClock()
	store := &fakeStore{members: members(3, "a")}
	env := environment(t, "production", store)
	var seen []segments.Inventory
	store.before = func(n int) {
		if n == 0 {
			seen = append(seen, env.Inventory())
		}
	}
	obs := &observed{}
	l := newLoop(fc, &bytes.Buffer{}, obs, env)
	if got := env.Inventory().State; got != segments.ScanNone {
		t.Fatalf("before any scan: %s, want none", got)
	}
	l.round(t.Context())
	first := env.Inventory()
	store.set(members(5, "a"), 0)
	l.round(t.Context())
	if len(seen) != 2 || seen[0].State != segments.ScanRunning || seen[0].Contexts != 0 ||
		seen[1].State != segments.ScanRunning || seen[1].Contexts != 3 || !seen[1].FinishedAt.Equal(first.FinishedAt) {
		t.Errorf("while scanning: %+v; want running with nothing, then running with the first scan's 3 contexts", seen)
	}
	if got := env.Inventory(); got.State != segments.ScanComplete || got.Contexts != 5 {
		t.Errorf("after: %s with %d contexts, want complete with 5", got.State, got.Contexts)
	}
	want := []event{{"production", segments.ScanComplete, 3, 0}, {"production", segments.ScanComplete, 5, 0}}
	if d := cmp.Diff(want, obs.events, cmp.AllowUnexported(event{})); d != "" {
		t.Errorf("observed (-want +got):\n%s", d)
	}
}

// TestFailedScanKeepsTheLastComplete: a scan that fails midway publishes the last complete
// counts (or none) with its state and the error, which the next complete scan clears.
func TestFailedScanKeepsTheLastComplete(t *testing.T) {
	for _, tc := range []struct {
		name      string
		firstOK   bool
		wantState string
		wantCount int64
	}{
		{"after a complete scan", true, segments.ScanComplete, 4},
		{"before any", false, segments.ScanNone, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeClock()
			store := &fakeStore{members: members(4, "a")}
			env := environment(t, "production", store)
			var logs bytes.Buffer
			l := newLoop(fc, &logs, nil, env)
			if tc.firstOK {
				l.round(t.Context())
			}
			store.set(members(10, "a", "b"), 2)
			fc.t = fc.t.Add(interval)
			l.round(t.Context())
			got := env.Inventory()
			if got.State != tc.wantState || got.Contexts != tc.wantCount || !strings.Contains(got.LastError, errDown.Error()) || !got.LastErrorAt.Equal(fc.t) {
				t.Errorf("after a failed scan: %+v; want %s, %d contexts, the error at %v", got, tc.wantState, tc.wantCount, fc.t)
			}
			if !strings.Contains(logs.String(), "inventory scan failed") {
				t.Errorf("logs: %s", logs.String())
			}
			store.set(members(10, "a", "b"), 0)
			l.round(t.Context())
			if got := env.Inventory(); got.State != segments.ScanComplete || got.Contexts != 10 || got.LastError != "" || len(got.Segments) != 2 {
				t.Errorf("after the next scan: %+v, want complete, 10 contexts, 2 segments and no error", got)
			}
		})
	}
}

// TestShrunkSegmentsAreObserved: the observer hears how many segments lost over half their
// contexts since the scan before, the first scan none.
func TestShrunkSegmentsAreObserved(t *testing.T) {
	store := &fakeStore{members: append(members(6, "a", "b"), members(4, "c")...)}
	obs := &observed{}
	l := newLoop(newFakeClock(), &bytes.Buffer{}, obs, environment(t, "production", store))
	l.round(t.Context())
	store.set(append(members(2, "a", "b"), members(4, "c")...), 0)
	l.round(t.Context())
	store.set(members(10, "c"), 0)
	l.round(t.Context())
	var got []int
	for _, e := range obs.events {
		got = append(got, e.shrunk)
	}
	if d := cmp.Diff([]int{0, 2, 2}, got); d != "" {
		t.Errorf("shrunk per scan (-want +got):\n%s", d)
	}
}

// TestRun scans at once, stops when its context ends, and does nothing without an interval
// or a store that can be scanned.
func TestRun(t *testing.T) {
	store := &fakeStore{members: members(3, "a")}
	env := environment(t, "production", store)
	notScanner := environment(t, "other", struct{ segments.Store }{store})
	obs := &observed{}
	l := New([]*segments.Environment{env, notScanner}, Settings{Interval: interval}, slog.New(slog.DiscardHandler), obs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	for env.Inventory().State != segments.ScanComplete {
		time.Sleep(time.Millisecond) // polling a condition
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if got := notScanner.Inventory().State; got != segments.ScanNone {
		t.Errorf("a store that cannot scan: %s", got)
	}
	if obs.events[0].state != segments.ScanNone || obs.events[0].env != "production" || len(obs.events) != 2 {
		t.Errorf("observed %+v, want production's none at the start, then its scan", obs.events)
	}
	off := New([]*segments.Environment{env}, Settings{}, slog.New(slog.DiscardHandler), nil)
	if err := off.Run(t.Context()); err != nil || store.scanned() != 1 {
		t.Errorf("without an interval: %v, %d scans, want nil and no more than the 1 before", err, store.scanned())
	}
}

// TestLeaseScansOncePerInterval: two replicas sharing a store scan it once an interval
// between them, and both serve the same counts; when the holder stops, the other takes over
// within two intervals.
func TestLeaseScansOncePerInterval(t *testing.T) {
	fc := newFakeClock()
	shared := &lease{now: fc.clock().now}
	store := &fakeStore{members: members(7, "a")}
	envA := environment(t, "production", &fakeFleet{fakeStore: store, lease: shared})
	envB := environment(t, "production", &fakeFleet{fakeStore: store, lease: shared})
	var logs bytes.Buffer
	a, b := newLoop(fc, &logs, nil, envA), newLoop(fc, &logs, nil, envB)
	const intervals = 5
	for i := range intervals {
		a.round(t.Context())
		b.round(t.Context())
		if got := store.scanned(); got != i+1 {
			t.Fatalf("after %d intervals: %d scans, want %d", i+1, got, i+1)
		}
		if ia, ib := envA.Inventory(), envB.Inventory(); ib.Contexts != 7 || !ia.FinishedAt.Equal(ib.FinishedAt) {
			t.Fatalf("interval %d: replicas serve %+v and %+v", i, ia, ib)
		}
		fc.t = fc.t.Add(interval)
	}
	for i := range 2 {
		b.round(t.Context())
		fc.t = fc.t.Add(interval)
		if store.scanned() > intervals {
			t.Logf("the other replica scanned after %d intervals", i+1)
			break
		}
	}
	if store.scanned() != intervals+1 {
		t.Errorf("the holder stopped: %d scans in two intervals, want 1", store.scanned()-intervals)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("warnings: %s", logs.String())
	}
}

// TestReadOnlyReplica: a replica whose store user may not take the lease never scans, says
// why once, and serves what another replica stored.
func TestReadOnlyReplica(t *testing.T) {
	fc := newFakeClock()
	shared := &lease{now: fc.clock().now}
	store := &fakeStore{members: members(7, "a")}
	writer := environment(t, "production", &fakeFleet{fakeStore: store, lease: shared})
	reader := &fakeFleet{fakeStore: store, lease: shared, readOnly: true}
	envR := environment(t, "production", reader)
	var logs bytes.Buffer
	w, r := newLoop(fc, &bytes.Buffer{}, nil, writer), newLoop(fc, &logs, &observed{}, envR)
	r.round(t.Context())
	if got := envR.Inventory().State; got != segments.ScanNone || store.scanned() != 0 {
		t.Errorf("nothing stored yet: %s, %d scans; want none and none", got, store.scanned())
	}
	for range 3 {
		w.round(t.Context())
		r.round(t.Context())
		fc.t = fc.t.Add(interval)
	}
	if got := envR.Inventory(); got.State != segments.ScanComplete || got.Contexts != 7 || store.scanned() != 3 {
		t.Errorf("read-only replica serves %+v after %d scans; want the writer's 3", got, store.scanned())
	}
	if n := strings.Count(logs.String(), "will not scan"); n != 1 || reader.takes != 1 {
		t.Errorf("said why %d times, took the lease %d times, want once each:\n%s", n, reader.takes, logs.String())
	}
}

// TestStoredResultNotWellFormed: what a replica loads that is not an inventory as bigseg
// stores it is a failed read, logged, and the counts served stay.
func TestStoredResultNotWellFormed(t *testing.T) {
	good := encode("production", segments.Inventory{State: segments.ScanComplete, Contexts: 2, FinishedAt: time.Unix(1, 0),
		Segments: []segments.SegmentCount{{Ref: "a", Included: 2}}}, 0)
	for _, data := range []string{`{`, `[]`, `{"state":"running","finishedAt":"2026-01-01T00:00:00Z"}`,
		`{"state":"complete"}`, `{"state":"complete","finishedAt":"2026-01-01T00:00:00Z","contexts":-1}`,
		`{"state":"complete","finishedAt":"2026-01-01T00:00:00Z","segments":[{"ref":"a","included":-1}]}`} {
		t.Run(data, func(t *testing.T) {
			fc := newFakeClock()
			shared := &lease{now: fc.clock().now, holder: "another", expires: fc.t.Add(interval), data: good}
			env := environment(t, "production", &fakeFleet{fakeStore: &fakeStore{}, lease: shared})
			var logs bytes.Buffer
			l := newLoop(fc, &logs, nil, env)
			l.round(t.Context())
			shared.data = []byte(data)
			l.round(t.Context())
			if got := env.Inventory(); got.Contexts != 2 || got.State != segments.ScanComplete {
				t.Errorf("serves %+v, want the good result's 2 contexts", got)
			}
			if !strings.Contains(logs.String(), "load the inventory") {
				t.Errorf("logs: %s", logs.String())
			}
		})
	}
}

// A failed scan is tried again after retryAfter, not a whole interval later; once it
// completes, the next waits the interval.
func TestFailedScanIsRetriedSooner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{members: members(3, "a"), failAfter: 2}
		env := environment(t, "production", store)
		l := New([]*segments.Environment{env}, Settings{Interval: time.Hour}, slog.New(slog.DiscardHandler), nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go l.Run(ctx)
		synctest.Wait()
		if store.scanned() != 1 || env.Inventory().LastError == "" {
			t.Fatalf("%d scans, %+v; want 1 that failed", store.scanned(), env.Inventory())
		}
		store.mu.Lock()
		store.failAfter = 0
		store.mu.Unlock()
		time.Sleep(retryAfter)
		synctest.Wait()
		if store.scanned() != 2 || env.Inventory().State != segments.ScanComplete {
			t.Fatalf("after %v: %d scans, %s; want a second that completed", retryAfter, store.scanned(), env.Inventory().State)
		}
		time.Sleep(time.Hour - time.Second)
		synctest.Wait()
		if store.scanned() != 2 {
			t.Errorf("%d scans before the interval, want 2", store.scanned())
		}
	})
}

// Data a scan cannot count (a key of the wrong type) is not a store's hiccup: the scan waits
// the interval, for the data to be fixed, rather than reading the store again every minute.
func TestInvalidDataWaitsTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{members: members(3, "a"), failWith: fmt.Errorf("%w: a key is not a set", segments.ErrInvalidData), failAfter: 2}
		env := environment(t, "production", store)
		l := New([]*segments.Environment{env}, Settings{Interval: time.Hour}, slog.New(slog.DiscardHandler), nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go l.Run(ctx)
		synctest.Wait()
		time.Sleep(time.Hour - time.Second)
		synctest.Wait()
		if store.scanned() != 1 || env.Inventory().LastError == "" {
			t.Errorf("%d scans within the interval, %+v; want the 1 that failed", store.scanned(), env.Inventory())
		}
	})
}

// Rounds are timed from their start: a scan of half an interval is followed by the next an
// interval after it started, not an interval after it ended, so a holder renews its lease every
// interval, inside the lease's interval and a half.
func TestRoundsTimedFromTheirStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{members: members(1800, "a")} // 30 minutes at 1 a second
		env := environment(t, "production", store)
		l := New([]*segments.Environment{env}, Settings{Interval: time.Hour, ReadsPerSecond: 1}, slog.New(slog.DiscardHandler), nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go l.Run(ctx)
		time.Sleep(time.Hour + time.Second)
		synctest.Wait()
		if store.scanned() != 2 {
			t.Errorf("%d scans began within an interval and a second, want 2", store.scanned())
		}
	})
}

// A scan renews its lease every third of an interval; if another replica holds it by then
// (this one renewed too late), the scan stops, so that two replicas never scan at once: it is
// no failure to show, and the counts served stay.
func TestScanStopsWhenTheLeaseIsLost(t *testing.T) {
	fc := newFakeClock()
	shared := &lease{now: fc.clock().now}
	store := &fakeStore{members: members(3600, "a")} // an hour at 1 a second
	store.before = func(n int) {
		if n == 600 { // ten minutes in: another replica took the lease
			shared.holder, shared.expires = "another", fc.t.Add(interval)
		}
	}
	env := environment(t, "production", &fakeFleet{fakeStore: store, lease: shared})
	var logs bytes.Buffer
	l := New([]*segments.Environment{env}, Settings{Interval: interval, ReadsPerSecond: 1}, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	l.clock = fc.clock()
	l.round(t.Context())
	if got := env.Inventory(); got.State != segments.ScanNone || got.LastError != "" {
		t.Errorf("after the lease was lost: %+v, want no scan and no error", got)
	}
	if took := fc.t.Sub(newFakeClock().t); took < interval/3 || took > interval/3+time.Second {
		t.Errorf("the scan stopped after %v, want at the first renewal, %v in", took, interval/3)
	}
	if !strings.Contains(logs.String(), "another replica holds the scan lease") || l.targets[0].held {
		t.Errorf("held %v; logs: %s", l.targets[0].held, logs.String())
	}
}
