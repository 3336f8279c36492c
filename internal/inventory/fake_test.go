package inventory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
)

// Run's goroutine is the caller's: none may outlive a test.
func TestMain(m *testing.M) {
	code := dynamotest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// fakeStore is a Scanner of the contexts it is given, in order.
type fakeStore struct {
	mu        sync.Mutex
	members   []segments.Membership
	cursor    string
	failAfter int         // Scan fails after this many contexts; 0: never
	failWith  error       // what it fails with; nil: errDown
	before    func(n int) // called before the nth context (from 0) is given to each, if not nil
	scans     int
}

var errDown = errors.New("store down")

func (s *fakeStore) Memberships(_ context.Context, hashes []string) []segments.Read {
	return make([]segments.Read, len(hashes))
}

func (s *fakeStore) Metadata(context.Context) (segments.Metadata, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return segments.Metadata{Cursor: s.cursor}, nil
}

func (s *fakeStore) Scan(ctx context.Context, _ func(int) error, each func(string, segments.Membership) error) error {
	s.mu.Lock()
	s.scans++
	members, failAfter, before, failWith := s.members, s.failAfter, s.before, cmp.Or(s.failWith, errDown)
	s.mu.Unlock()
	for i, m := range members {
		if failAfter > 0 && i == failAfter {
			return failWith
		}
		if before != nil {
			before(i)
		}
		if err := each(fmt.Sprintf("hash-%d", i), m); err != nil {
			return err
		}
	}
	return nil
}

func (s *fakeStore) set(members []segments.Membership, failAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members, s.failAfter = members, failAfter
}

func (s *fakeStore) scanned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scans
}

// lease is a scan lease and stored result that several fakeFleets share, as replicas share a
// Redis; its time is the test's clock.
type lease struct {
	now     func() time.Time
	holder  string
	expires time.Time
	data    []byte
}

// fakeFleet is one replica's view of a shared store: a fakeStore and the lease.
type fakeFleet struct {
	*fakeStore
	lease    *lease
	readOnly bool
	leaseErr error // TakeLease's error, if not nil: the store unreachable
	takes    int
}

func (f *fakeFleet) TakeLease(_ context.Context, owner string, ttl time.Duration) (bool, error) {
	f.takes++
	if f.readOnly {
		return false, fmt.Errorf("NOPERM this user has no permissions to run the 'set' command: %w", fs.ErrPermission)
	}
	if f.leaseErr != nil {
		return false, f.leaseErr
	}
	now := f.lease.now()
	if f.lease.holder == owner || !now.Before(f.lease.expires) {
		f.lease.holder, f.lease.expires = owner, now.Add(ttl)
	}
	return f.lease.holder == owner, nil
}

func (f *fakeFleet) SaveInventory(_ context.Context, data []byte) error {
	f.lease.data = data
	return nil
}

func (f *fakeFleet) LoadInventory(context.Context) ([]byte, error) { return f.lease.data, nil }

func (f *fakeFleet) ReleaseLease(_ context.Context, owner string) error {
	if f.lease.holder == owner {
		f.lease.holder = ""
	}
	return nil
}

// fakeClock is a clock whose sleeps pass at once, moving its time on.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)} }

func (c *fakeClock) clock() clock {
	return clock{now: func() time.Time { return c.t }, sleep: func(_ context.Context, d time.Duration) error {
		c.t = c.t.Add(d)
		return nil
	}}
}

// observed records what an Observer is told.
type observed struct {
	mu     sync.Mutex
	events []event
}

type event struct {
	env      string
	state    string
	contexts int64
	shrunk   int
}

func (o *observed) Scanned(env string, inv segments.Inventory, shrunk int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, event{env, inv.State, inv.Contexts, shrunk})
}

// environment returns the environment named name served from store.
func environment(t *testing.T, name string, store segments.Store) *segments.Environment {
	t.Helper()
	return environmentWithPrefix(t, name, "", store)
}

// environmentWithPrefix returns the environment named name, of prefix, served from store.
func environmentWithPrefix(t *testing.T, name, prefix string, store segments.Store) *segments.Environment {
	t.Helper()
	svc, err := segments.New([]segments.Environment{{Name: name, Prefix: prefix, Store: store}}, segments.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Environments()[0]
}

// members returns n contexts each included in the refs given.
func members(n int, included ...string) []segments.Membership {
	out := make([]segments.Membership, n)
	for i := range out {
		out[i] = segments.NewMembership(included, nil)
	}
	return out
}
