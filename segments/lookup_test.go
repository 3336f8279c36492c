package segments

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
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
			s := newOne(store, Config{Now: clk.Now})
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

// panickyMetadata is a fakeStore whose Metadata panics.
type panickyMetadata struct{ *fakeStore }

func (panickyMetadata) Metadata(context.Context) (Metadata, error) { panic("metadata bug") }

// A store whose Metadata panics fails the poll as any failed read does, on every path a poll
// takes: the environment is unavailable, lookups answer STORE_ERROR, and the process goes on.
func TestPanickingMetadataFailsThePoll(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		poll func(s one)
	}{
		{"a first lookup's inline poll", Config{}, func(s one) { s.LookupHash(context.Background(), Hash("alice")) }},
		{"Poll", Config{}, func(s one) { s.Poll(context.Background()) }},
		{"Run", Config{}, func(s one) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- s.Run(ctx) }()
			synctest.Wait()
			cancel()
			<-done
		}},
		{"a read of every environment's metadata", Config{ReadMetadata: func(context.Context) []MetadataRead { panic("batch bug") }},
			func(s one) { s.Poll(context.Background()) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logged strings.Builder
				tt.cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
				s := newOne(panickyMetadata{newFakeStore()}, tt.cfg)
				tt.poll(s)
				if st, polled := s.Status(); !polled || st.Available {
					t.Errorf("status after a panicking poll: %+v, polled %v; want unavailable", st, polled)
				}
				if r := s.LookupHash(context.Background(), Hash("bob")); r.Status != StoreError {
					t.Errorf("lookup: %s, %v; want STORE_ERROR", r.Status, r.Err)
				}
				if !strings.Contains(logged.String(), "store panicked") {
					t.Errorf("log %q does not say the store panicked", logged.String())
				}
			})
		})
	}
}
