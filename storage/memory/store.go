// Package memory is the embedded Big Segments store: memberships loaded from a fixture (see
// package fixture) and held in memory. It lets bigseg run, and be tried, without Redis; it is not a production
// store, since nothing keeps it synchronized.
package memory

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
)

// Store is a segments.Store over an in-memory snapshot. It is safe for concurrent use, and
// Replace swaps the whole snapshot at once.
type Store struct {
	now   func() time.Time
	file  string // the fixture file of Open, read again by Reload
	snap  atomic.Pointer[snapshot]
	loads atomic.Int64
}

var _ segments.Store = (*Store)(nil)

type snapshot struct {
	memberships map[string]segments.Membership // by hash
	synced      *time.Time                     // nil: always now
	cursor      string
}

// New returns a store holding f, on the clock now. When f has no synchronizedOn, the data is
// as of every read: the file is all there is to be in sync with, so the store is never stale
// (the example fixture does not go stale two minutes into a try-out). A nil f is an empty
// store.
func New(f *fixture.Fixture, now func() time.Time) *Store {
	s := &Store{now: now}
	s.Replace(f)
	return s
}

// Open returns a store holding the fixture of file ("" for an empty store), on the clock now.
func Open(file string, now func() time.Time) (*Store, error) {
	s := &Store{now: now, file: file}
	return s, s.Reload()
}

// Reload reads Open's file again and swaps it in (SIGHUP); if it does not read, the data
// loaded before stays.
func (s *Store) Reload() error {
	var f *fixture.Fixture
	if s.file != "" {
		var err error
		if f, err = fixture.ReadFile(s.file); err != nil {
			return err
		}
	}
	s.Replace(f)
	return nil
}

// Replace swaps in f, with the same rules as New. Its cursor is f's, or, when f has none,
// "load-N" for the Nth load of this store: a reload is a change.
func (s *Store) Replace(f *fixture.Fixture) {
	snap := &snapshot{memberships: make(map[string]segments.Membership), cursor: fmt.Sprintf("load-%d", s.loads.Add(1))}
	if f != nil {
		for _, c := range f.Contexts {
			snap.memberships[c.Hash] = c.Membership()
		}
		snap.synced = f.SynchronizedOn
		if f.Cursor != "" {
			snap.cursor = f.Cursor
		}
	}
	s.snap.Store(snap)
}

// Len returns the number of contexts held.
func (s *Store) Len() int { return len(s.snap.Load().memberships) }

// Memberships implements segments.Store.
func (s *Store) Memberships(ctx context.Context, hashes []string) []segments.Read {
	snap := s.snap.Load()
	reads := make([]segments.Read, len(hashes))
	for i, h := range hashes {
		reads[i].Membership = snap.memberships[h]
	}
	return reads
}

// Metadata implements segments.Store.
func (s *Store) Metadata(ctx context.Context) (segments.Metadata, error) {
	snap := s.snap.Load()
	md := segments.Metadata{LastSynchronized: s.now(), Cursor: snap.cursor}
	if snap.synced != nil {
		md.LastSynchronized = *snap.synced
	}
	return md, nil
}
