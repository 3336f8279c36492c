// Package storetest is the behaviour every segments.Store must have, as one table that the
// tests of each store run against it (the embedded store and real Redis alike).
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/segments"
)

// Entry is one context's stored refs.
type Entry struct {
	Included, Excluded []string
}

// Seed is the data a case needs in the store.
type Seed struct {
	// Contexts by hash.
	Contexts map[string]Entry
	// SynchronizedOn is written as the synchronization time unless zero (never synchronized).
	SynchronizedOn time.Time
	// Cursor is written as the data's version unless empty. A store seeded without one may
	// report one of its own (the embedded store counts its loads) or none (Redis).
	Cursor string
}

// NewStore returns a store holding seed and nothing else.
type NewStore func(t *testing.T, seed Seed) segments.Store

var (
	alice = segments.Hash("alice")
	bob   = segments.Hash("bob")
	carol = segments.Hash("carol")
)

// Run runs the contract against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	synced := time.UnixMilli(1764430000123)
	seed := Seed{
		Contexts: map[string]Entry{
			alice: {Included: []string{"beta-users.g3", "early-access.g1"}, Excluded: []string{"blocked.g1"}},
			bob:   {Excluded: []string{"beta-users.g3"}},
			carol: {Included: []string{"both.g1", "odd ref: ü/+%"}, Excluded: []string{"both.g1"}},
		},
		SynchronizedOn: synced,
		Cursor:         "2026-11-29T12:00:00Z#42",
	}

	t.Run("memberships", func(t *testing.T) { memberships(t, newStore(t, seed)) })
	t.Run("metadata", func(t *testing.T) { metadata(t, newStore, seed) })
}

// memberships checks reads of the contexts of Run's seed.
func memberships(t *testing.T, store segments.Store) {
	tests := []struct {
		name   string
		hashes []string
		want   []map[string]bool
	}{
		{"included and excluded", []string{alice},
			[]map[string]bool{{"beta-users.g3": true, "early-access.g1": true, "blocked.g1": false}}},
		{"excluded only", []string{bob}, []map[string]bool{{"beta-users.g3": false}}},
		{"included wins over excluded", []string{carol}, []map[string]bool{{"both.g1": true, "odd ref: ü/+%": true}}},
		{"no entries is no membership", []string{segments.Hash("nobody")}, []map[string]bool{{}}},
		{"batch keeps order", []string{bob, segments.Hash("nobody"), alice},
			[]map[string]bool{{"beta-users.g3": false}, {}, {"beta-users.g3": true, "early-access.g1": true, "blocked.g1": false}}},
		{"same hash twice", []string{bob, bob}, []map[string]bool{{"beta-users.g3": false}, {"beta-users.g3": false}}},
		{"empty batch", []string{}, []map[string]bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reads := store.Memberships(context.Background(), tt.hashes)
			got := make([]map[string]bool, len(reads))
			for i, r := range reads {
				if r.Err != nil {
					t.Fatalf("read %d: %v", i, r.Err)
				}
				got[i] = Map(r.Membership)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("memberships (-want +got):\n%s", diff)
			}
		})
	}
}

// metadata checks the metadata of Run's seed, and of a store never synchronized.
func metadata(t *testing.T, newStore NewStore, seed Seed) {
	tests := []struct {
		name string
		seed Seed
		want time.Time
	}{
		{"synchronized", seed, seed.SynchronizedOn},
		{"never synchronized", Seed{}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md, err := newStore(t, tt.seed).Metadata(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !md.LastSynchronized.Equal(tt.want) {
				t.Errorf("LastSynchronized = %v, want %v", md.LastSynchronized, tt.want)
			}
		})
	}
}

// Map is m as a map of ref to included, for comparisons.
func Map(m segments.Membership) map[string]bool {
	out := make(map[string]bool)
	for r, inc := range m.All() {
		out[r] = inc
	}
	return out
}
