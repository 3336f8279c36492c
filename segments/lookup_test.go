package segments

import (
	"context"
	"strings"
	"testing"
)

// brokenStore is a fakeStore whose Memberships breaks the Store contract.
type brokenStore struct {
	*fakeStore
	memberships func(hashes []string) []Read
}

func (b brokenStore) Memberships(_ context.Context, hashes []string) []Read {
	b.reads.Add(1)
	return b.memberships(hashes)
}

// A store that panics, or answers for another number of contexts than it was asked for, fails
// that read with an error saying which it did: single lookups and batches answer STORE_ERROR,
// nothing is cached, the process goes on, and a store that behaves again is read again.
func TestBrokenStoreFailsTheRead(t *testing.T) {
	tests := []struct {
		name        string
		memberships func(hashes []string) []Read
		wantErr     string
		panics      bool
	}{
		{"panics", func([]string) []Read { panic("bug") }, "store panicked: bug", true},
		{"too few reads", func(hashes []string) []Read { return make([]Read, len(hashes)-1) },
			"store returned 0 reads for 1 contexts", false},
		{"too many reads", func(hashes []string) []Read { return make([]Read, len(hashes)+1) },
			"store returned 2 reads for 1 contexts", false},
		{"no reads", func([]string) []Read { return nil }, "store returned 0 reads for 1 contexts", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			fake, clk := newFakeStore(), newClock()
			fake.setMeta(clk.Now(), nil)
			broken := true
			store := brokenStore{fake, func(hashes []string) []Read {
				if broken {
					return tt.memberships(hashes)
				}
				return make([]Read, len(hashes))
			}}
			s := newOne(store, WithClock(clk.Now))
			check := func(what string, r Answer) {
				t.Helper()
				if r.Status != StoreError || r.Err == nil || !strings.Contains(r.Err.Error(), tt.wantErr) {
					t.Errorf("%s: %s, %v; want STORE_ERROR and an error saying %q", what, r.Status, r.Err, tt.wantErr)
				}
				if !tt.panics && strings.Contains(r.Err.Error(), "panic") {
					t.Errorf("%s: %v; the store did not panic", what, r.Err)
				}
			}
			check("lookup", s.LookupHash(ctx, Hash("alice")))
			check("batch of one", s.LookupBatch(ctx, []string{Hash("bob")})[0])
			broken = false
			for _, h := range []string{Hash("alice"), Hash("bob")} {
				if r := s.LookupHash(ctx, h); r.Err != nil || r.Cached || r.Status != Healthy {
					t.Errorf("once the store behaves: cached %v, %s, %v; want a healthy read", r.Cached, r.Status, r.Err)
				}
			}
		})
	}
}
