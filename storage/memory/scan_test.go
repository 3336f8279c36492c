package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/internal/storetest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
)

func fixtureOf(seed storetest.Seed) *fixture.Fixture {
	f := &fixture.Fixture{}
	for h, e := range seed.Contexts {
		f.Contexts = append(f.Contexts, fixture.Context{Hash: h, Included: e.Included, Excluded: e.Excluded})
	}
	return f
}

func TestScanContract(t *testing.T) {
	storetest.RunScan(t, func(t *testing.T, seed storetest.Seed) storetest.Scanner {
		return memory.New(fixtureOf(seed), time.Now)
	})
}

// A fixture's entry with no refs is nothing stored: not a context of the inventory.
func TestScanSkipsEntriesWithoutRefs(t *testing.T) {
	f, err := fixture.Parse([]byte(`{"contexts":{"alice":{"included":["a.g1"]},"bob":{},"carol":{"excluded":[]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]bool{segments.Hash("alice"): {"a.g1": true}}
	if diff := cmp.Diff(want, storetest.Scanned(t, memory.New(f, time.Now))); diff != "" {
		t.Errorf("scanned (-want +got):\n%s", diff)
	}
}

func TestScanEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := memory.New(fixtureOf(storetest.ScanSeed(10)), time.Now).Scan(ctx, func(int) error { return nil }, func(string, segments.Membership) error {
		t.Error("each called after ctx ended")
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Scan = %v, want context.Canceled", err)
	}
}

func TestDescribe(t *testing.T) {
	got := memory.New(nil, time.Now).Describe(segments.Hash("alice"))
	if diff := cmp.Diff(segments.StoreView{Kind: "embedded"}, got); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}
}
