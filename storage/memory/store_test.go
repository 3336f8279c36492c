package memory_test

import (
	"context"
	"os"
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
		return memory.New(f, time.Now)
	})
}

// A fixture without a synchronizedOn of its own is data as of every read: never stale.
func TestFixtureWithoutSynchronizedOnIsAlwaysFresh(t *testing.T) {
	now := time.UnixMilli(1764430000000)
	f, err := fixture.Parse([]byte(`{"contexts":{"alice":{"included":["a.g1"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := memory.New(f, func() time.Time { return now })
	for range 2 {
		md, err := s.Metadata(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !md.LastSynchronized.Equal(now) {
			t.Errorf("LastSynchronized = %v, want the time of the read %v", md.LastSynchronized, now)
		}
		now = now.Add(time.Hour)
	}
	r := s.Memberships(context.Background(), []string{segments.Hash("alice")})[0]
	if inc, ok := storetest.Map(r.Membership)["a.g1"]; !inc || !ok {
		t.Errorf("alice not included in a.g1: %v", storetest.Map(r.Membership))
	}
}

func TestReplace(t *testing.T) {
	s := memory.New(nil, time.Now)
	if s.Len() != 0 {
		t.Fatalf("Len = %d, want 0", s.Len())
	}
	f, err := fixture.Parse([]byte(`{"contexts":{"alice":{"included":["a.g1"]},"bob":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s.Replace(f)
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2", s.Len())
	}
}

// A reload is a change: the store's cursor is the fixture's, or a count of its loads.
func TestReloadIsAChange(t *testing.T) {
	s := memory.New(nil, time.Now)
	cursor := func() string {
		md, err := s.Metadata(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return md.Cursor
	}
	first := cursor()
	s.Replace(nil)
	if second := cursor(); second == first || second == "" {
		t.Errorf("cursor after a reload without one of its own: %q, before %q", second, first)
	}
	s.Replace(&fixture.Fixture{Cursor: "v7"})
	if got := cursor(); got != "v7" {
		t.Errorf("cursor of a fixture with one: %q, want v7", got)
	}
}

// Open reads its file; Reload reads it again, and keeps the data loaded before when it does
// not read.
func TestOpenAndReload(t *testing.T) {
	file := t.TempDir() + "/seed.json"
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"contexts": {"alice": {"included": ["a.g1"]}}}`)
	s, err := memory.Open(file, time.Now)
	if err != nil || s.Len() != 1 {
		t.Fatalf("Open: %v, %d contexts", err, s.Len())
	}
	write(`{"contexts": {"alice": {"included": ["a.g1"]}, "bob": {"included": ["a.g1"]}}}`)
	if err := s.Reload(); err != nil || s.Len() != 2 {
		t.Errorf("Reload: %v, %d contexts, want 2", err, s.Len())
	}
	write(`{"contexts": `)
	if err := s.Reload(); err == nil || s.Len() != 2 {
		t.Errorf("Reload of a broken file: %v, %d contexts, want an error and the 2 before", err, s.Len())
	}
	if _, err := memory.Open(file+".missing", time.Now); err == nil {
		t.Error("Open of a missing file: no error")
	}
	if s, err := memory.Open("", time.Now); err != nil || s.Len() != 0 {
		t.Errorf("Open of no file: %v, %d contexts", err, s.Len())
	}
}
