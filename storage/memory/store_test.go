package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/storetest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) segments.Store {
		f := &fixture.Fixture{SynchronizedOn: &seed.SynchronizedOn, Cursor: seed.Cursor}
		for h, e := range seed.Contexts {
			f.Contexts = append(f.Contexts, fixture.Context{Hash: h, Included: e.Included, Excluded: e.Excluded})
		}
		return memory.New(f, time.Now())
	})
}

func TestLoadTimeCountsAsSynchronization(t *testing.T) {
	loaded := time.UnixMilli(1764430000000)
	f, err := fixture.Parse([]byte(`{"contexts":{"alice":{"included":["a.g1"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := memory.New(f, loaded)
	md, err := s.Metadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !md.LastSynchronized.Equal(loaded) {
		t.Errorf("LastSynchronized = %v, want the load time %v", md.LastSynchronized, loaded)
	}
	r := s.Memberships(context.Background(), []string{segments.Hash("alice")})[0]
	if inc, ok := r.Membership.Map()["a.g1"]; !inc || !ok {
		t.Errorf("alice not included in a.g1: %v", r.Membership.Map())
	}
}

func TestReplace(t *testing.T) {
	s := memory.New(nil, time.Now())
	if s.Len() != 0 {
		t.Fatalf("Len = %d, want 0", s.Len())
	}
	f, err := fixture.Parse([]byte(`{"contexts":{"alice":{"included":["a.g1"]},"bob":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s.Replace(f, time.Now())
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2", s.Len())
	}
}

// A reload is a change: the store's cursor is the fixture's, or a count of its loads.
func TestReloadIsAChange(t *testing.T) {
	s := memory.New(nil, time.Now())
	cursor := func() string {
		md, err := s.Metadata(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return md.Cursor
	}
	first := cursor()
	s.Replace(nil, time.Now())
	if second := cursor(); second == first || second == "" {
		t.Errorf("cursor after a reload without one of its own: %q, before %q", second, first)
	}
	s.Replace(&fixture.Fixture{Cursor: "v7"}, time.Now())
	if got := cursor(); got != "v7" {
		t.Errorf("cursor of a fixture with one: %q, want v7", got)
	}
}
