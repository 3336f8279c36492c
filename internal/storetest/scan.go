package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/segments"
)

// Scanner is a store that can list every context it holds, as the inventory scans it.
type Scanner interface {
	Scan(ctx context.Context, walked func(skipped int) error, each func(hash string, m segments.Membership) error) error
}

// noWalk is a walked that lets a scan go on.
func noWalk(int) error { return nil }

// NewScanner returns a store holding seed and nothing else, that can scan itself.
type NewScanner func(t *testing.T, seed Seed) Scanner

// ScanSeed is a seed of n contexts besides Run's three (one in both sets of a ref, one with
// excluded refs only): a third included only, a third excluded only, a third in both, over a
// few refs, so that a scan of it spans several pages.
func ScanSeed(n int) Seed {
	seed := Seed{Contexts: map[string]Entry{
		alice: {Included: []string{"beta-users.g3", "early-access.g1"}, Excluded: []string{"blocked.g1"}},
		bob:   {Excluded: []string{"beta-users.g3"}},
		carol: {Included: []string{"both.g1", "odd ref: ü/+%"}, Excluded: []string{"both.g1"}},
	}}
	for i := range n {
		inc, exc := []string{fmt.Sprintf("seg-%d.g1", i%7)}, []string{fmt.Sprintf("seg-%d.g2", i%5)}
		switch i % 3 {
		case 0:
			exc = nil
		case 1:
			inc = nil
		}
		seed.Contexts[segments.Hash(fmt.Sprint("scan-", i))] = Entry{Included: inc, Excluded: exc}
	}
	return seed
}

// RunScan runs the scan contract against stores made by newStore: every context stored is
// emitted once, with both its sets; an empty store emits none; the first error of each ends
// the scan and is returned; and a Describer names no keys for the hash "".
func RunScan(t *testing.T, newStore NewScanner) {
	t.Run("empty", func(t *testing.T) {
		if got := Scanned(t, newStore(t, Seed{})); len(got) != 0 {
			t.Errorf("an empty store emitted %d contexts", len(got))
		}
	})
	t.Run("every context once with both sets", func(t *testing.T) {
		seed := ScanSeed(250)
		got := Scanned(t, newStore(t, seed))
		if diff := cmp.Diff(Want(seed), got); diff != "" {
			t.Errorf("scanned (-want +got):\n%s", diff)
		}
	})
	t.Run("each's error ends the scan", func(t *testing.T) {
		store := newStore(t, ScanSeed(250))
		stop, calls := errors.New("stop"), 0
		err := store.Scan(context.Background(), noWalk, func(string, segments.Membership) error {
			if calls++; calls == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || calls != 3 {
			t.Errorf("Scan = %v after %d calls, want each's error after 3", err, calls)
		}
		if d, ok := store.(interface {
			Describe(string) segments.StoreView
		}); ok {
			if v := d.Describe(""); len(v.Keys) != 0 {
				t.Errorf(`Describe("") names keys %q, want none`, v.Keys)
			}
		}
	})
	t.Run("walked's error ends the scan", func(t *testing.T) {
		store := newStore(t, ScanSeed(250))
		stop, walks, emitted := errors.New("stop"), 0, 0
		err := store.Scan(context.Background(), func(int) error {
			walks++
			return stop
		}, func(string, segments.Membership) error {
			emitted++
			return nil
		})
		// A store that walks nothing (the embedded one) never calls walked.
		if walks > 0 && (!errors.Is(err, stop) || walks != 1 || emitted != 0) {
			t.Errorf("Scan = %v after %d walks and %d contexts, want walked's error after its first call and none", err, walks, emitted)
		}
	})
}

// Scanned is what a scan of store emits, by hash; a context emitted twice fails the test.
func Scanned(t testing.TB, store Scanner) map[string]map[string]bool {
	t.Helper()
	got := map[string]map[string]bool{}
	err := store.Scan(context.Background(), noWalk, func(hash string, m segments.Membership) error {
		if _, twice := got[hash]; twice {
			t.Errorf("context %s emitted twice", hash)
		}
		got[hash] = Map(m)
		return nil
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return got
}

// Want is what a scan of seed emits: every context with refs, a ref in both sets included.
func Want(seed Seed) map[string]map[string]bool {
	want := map[string]map[string]bool{}
	for h, e := range seed.Contexts {
		if m := segments.NewMembership(e.Included, e.Excluded); m.Len() > 0 {
			want[h] = Map(m)
		}
	}
	return want
}
