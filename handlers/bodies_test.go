package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/limit"
	"github.com/bigseg/bigseg/segments"
)

// emptyStore holds nothing and was synchronized just now.
type emptyStore struct{}

func (emptyStore) Memberships(_ context.Context, hashes []string) []segments.Read {
	return make([]segments.Read, len(hashes))
}

func (emptyStore) Metadata(context.Context) (segments.Metadata, error) {
	return segments.Metadata{LastSynchronized: time.Now()}, nil
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
}

// TestBatchHoldsMemoryForItsLookups: a batch of many small keys holds memory from the body
// budget for its lookups, not only its body, until it is answered: with room for one such
// batch, a second one needs the memory of the first, whose answer is not being read, and cuts
// it off.
func TestBatchHoldsMemoryForItsLookups(t *testing.T) {
	h := New(Config{Batches: limit.NewBodies(0).Limit(10_000, DefaultBodyReadTimeout, BatchUses(0), Error)}, oneService(emptyStore{}))
	body := `{"contextKeys":["k"` + strings.Repeat(`,"k"`, 999) + `]}` // 4 KB: its 1,000 lookups take 256 KB
	newReq := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/memberships", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	stuck := apitest.NewStuckWriter()
	done := make(chan struct{})
	go func() { h.ServeHTTP(stuck, newReq()); close(done) }()
	<-stuck.Writing
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, newReq())
	<-done
	if rec.Code != http.StatusOK || !stuck.Cut() {
		t.Errorf("a second batch of 1,000 keys: %d, first one cut: %v; want 200, and the first cut for its memory", rec.Code, stuck.Cut())
	}
}

// TestUnreadStreamEnds: a status stream whose client reads nothing ends once a write has
// waited for the stream write timeout, and gives its slot back.
func TestUnreadStreamEnds(t *testing.T) {
	h := New(Config{Streams: limit.Streams(1, Error), Heartbeat: time.Millisecond,
		StreamWriteTimeout: 50 * time.Millisecond}, oneService(emptyStore{}))
	stuck := apitest.NewStuckWriter()
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(stuck, httptest.NewRequest(http.MethodGet, "/status/stream", nil))
		close(done)
	}()
	<-stuck.Writing
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang detector
		t.Fatal("the unread stream still runs 10 s on")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the next stream's client leaves after its first event
	next := apitest.NewStuckWriter()
	close(next.Release) // a client that reads
	h.ServeHTTP(next, httptest.NewRequestWithContext(ctx, http.MethodGet, "/status/stream", nil))
	if next.Code != http.StatusOK {
		t.Errorf("a stream after the unread one ended: %d, want 200: its slot was not given back", next.Code)
	}
}
