package segments

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// fakeStore is a Store in memory whose reads can be counted, blocked and failed.
type fakeStore struct {
	mu          sync.Mutex
	memberships map[string]Membership
	synced      time.Time
	cursor      string
	metaErr     error
	readErr     map[string]error // by hash

	reads     atomic.Int64 // Memberships calls
	hashes    atomic.Int64 // hashes read
	metaReads atomic.Int64
	block     chan struct{} // when set, Memberships waits for it to close (or ctx to end) before it answers
	metaBlock chan struct{} // when set, Metadata waits for it to close, then answers as at its call
	inFlight  atomic.Int64  // Memberships calls running
	maxFlight atomic.Int64  // the most ever running at once
}

func newFakeStore() *fakeStore {
	return &fakeStore{memberships: map[string]Membership{}, readErr: map[string]error{}}
}

func (f *fakeStore) put(key string, included, excluded []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.memberships[Hash(key)] = NewMembership(included, excluded)
}

func (f *fakeStore) failRead(key string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readErr[Hash(key)] = err
}

// patch changes a context's membership and the cursor, as a synchronizer's patch does.
func (f *fakeStore) patch(key string, included []string, cursor string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.memberships[Hash(key)] = NewMembership(included, nil)
	f.cursor = cursor
}

func (f *fakeStore) setMeta(synced time.Time, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced, f.metaErr = synced, err
}

func (f *fakeStore) Memberships(ctx context.Context, hashes []string) []Read {
	f.reads.Add(1)
	f.hashes.Add(int64(len(hashes)))
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxFlight.Load()
		if n <= m || f.maxFlight.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	block := f.block
	out := make([]Read, len(hashes)) // the data as it is when the read starts
	for i, h := range hashes {
		if err := f.readErr[h]; err != nil {
			out[i].Err = err
			continue
		}
		out[i].Membership = f.memberships[h]
	}
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done(): // as a store should
			return slices.Repeat([]Read{{Err: ctx.Err()}}, len(hashes))
		}
	}
	return out
}

func (f *fakeStore) Metadata(ctx context.Context) (Metadata, error) {
	f.metaReads.Add(1)
	f.mu.Lock()
	md, err, block := Metadata{LastSynchronized: f.synced, Cursor: f.cursor}, f.metaErr, f.metaBlock
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	return md, err
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var errBoom = errors.New("boom")

// one is a Service of one environment, with the methods of both.
type one struct {
	*Service
	*Environment
}

// newOne is the Service of one environment, named default, over store.
func newOne(store Store, cfg Config) one {
	s, err := New([]Environment{{Name: "default", Store: store}}, cfg)
	if err != nil {
		panic(err)
	}
	return one{s, s.Environments()[0]}
}

// Poll polls and returns the environment's status.
func (o one) Poll(ctx context.Context) StoreStatus {
	o.Service.Poll(ctx)
	st, _ := o.Status()
	return st
}

// Readiness is the service's.
func (o one) Readiness() (bool, string) { return o.Service.Readiness() }
