package inventory

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/segments"
)

// TestLeaseOutageIsShown: a store that cannot be reached when the lease is taken (not a
// refusal of permission) shows on /segments as a failed scan does: the last complete counts
// and their state, with the error and when; the next interval's scan clears it.
func TestLeaseOutageIsShown(t *testing.T) {
	fc := newFakeClock()
	store := &fakeStore{members: members(4, "a")}
	fleet := &fakeFleet{fakeStore: store, lease: &lease{now: fc.clock().now}}
	env := environment(t, "production", fleet)
	var logs bytes.Buffer
	l := newLoop(fc, &logs, nil, env)
	l.round(t.Context())
	fleet.leaseErr = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	fc.t = fc.t.Add(interval)
	l.round(t.Context())
	got := env.Inventory()
	if got.State != segments.ScanComplete || got.Contexts != 4 || !strings.Contains(got.LastError, "connection refused") || !got.LastErrorAt.Equal(fc.t) {
		t.Errorf("after the lease failed: %+v; want complete, 4 contexts, the error at %v", got, fc.t)
	}
	fleet.leaseErr = nil
	fc.t = fc.t.Add(interval)
	l.round(t.Context())
	if got := env.Inventory(); got.State != segments.ScanComplete || got.LastError != "" || !got.FinishedAt.Equal(fc.t) {
		t.Errorf("after the store came back: %+v, want a new complete scan and no error", got)
	}
}

// TestCursorsAreTheStores: a scan's cursors are read from the store when it starts, not the
// status poller's, which may be an interval old.
func TestCursorsAreTheStores(t *testing.T) {
	store := &fakeStore{members: members(2, "a"), cursor: "c0"}
	svc, err := segments.New([]segments.Environment{{Name: "production", Store: store}}, segments.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Poll(t.Context())
	env := svc.Environments()[0]
	if st, polled := env.Status(); !polled || st.Cursor != "c0" {
		t.Fatalf("polled %v at %q, want c0", polled, st.Cursor)
	}
	store.mu.Lock()
	store.cursor = "c1"
	store.mu.Unlock()
	inv, err := scan(t.Context(), env, store, 0, newFakeClock().clock(), nil, nil)
	if err != nil || inv.CursorStart != "c1" || inv.CursorFinish != "c1" {
		t.Errorf("cursors %q to %q (%v), want the store's c1", inv.CursorStart, inv.CursorFinish, err)
	}
}

// TestDurationLoggedAsText: a scan's duration is logged as Go writes a duration ("10s"), not
// nanoseconds, in JSON logs as in text.
func TestDurationLoggedAsText(t *testing.T) {
	fc := newFakeClock()
	env := environment(t, "production", &fakeStore{members: members(100, "a")})
	var logs bytes.Buffer
	l := New([]*segments.Environment{env}, Settings{Interval: interval, ReadsPerSecond: 10}, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	l.clock = fc.clock()
	l.round(context.Background())
	if !strings.Contains(logs.String(), `"duration":"10s"`) {
		t.Errorf("logs: %s", logs.String())
	}
}
