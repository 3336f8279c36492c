package handlers

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/limit"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
)

var benchResult = segments.Answer{
	ContextHash: segments.Hash("alice"),
	Membership:  segments.NewMembership([]string{"beta-users.g3", "early-access.g2", "enterprise.g7"}, []string{"blocked.g1"}),
	Status:      segments.Healthy,
}

func BenchmarkAppendResult(b *testing.B) {
	e := &encoder{b: make([]byte, 0, 512)}
	b.ReportAllocs()
	for b.Loop() {
		e.b = e.b[:0]
		e.result("alice", benchResult)
	}
	b.SetBytes(int64(len(e.b)))
}

// discard is a ResponseWriter that keeps nothing, so the benchmark measures the handler.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkHandlerCacheHit is the whole handler (routing, middleware with a request
// observer, lookup, encoding) for a cached key.
func BenchmarkHandlerCacheHit(b *testing.B) {
	f := &fixture.Fixture{Contexts: []fixture.Context{{Key: "alice", Hash: segments.Hash("alice"),
		Included: []string{"beta-users.g3", "early-access.g2", "enterprise.g7"}, Excluded: []string{"blocked.g1"}}}}
	svc := oneService(memory.New(f, time.Now))
	h := New(Config{Observe: func(string, string, int, time.Duration) {}}, svc)
	req := httptest.NewRequest(http.MethodGet, "/memberships/alice", nil)
	w := &discard{h: http.Header{}}
	h.ServeHTTP(w, req)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

// BenchmarkParseBatch is decoding a batch body of 100 keys (strictly: no repeated fields, no
// lone surrogates), as POST /memberships does before any lookup.
func BenchmarkParseBatch(b *testing.B) {
	s := &server{Config: Config{MaxBatch: 1000}}
	var body []byte
	body = append(body, `{"contextKeys":[`...)
	for i := range 100 {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `"user-`...)
		body = strconv.AppendInt(body, int64(i), 10)
		body = append(body, '"')
	}
	body = append(body, "]}"...)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if req, err := s.parseBatch(body); err != nil || len(req.ContextKeys) != 100 {
			b.Fatalf("%d keys, %v", len(req.ContextKeys), err)
		}
	}
}

// BenchmarkHandlerBatch is the whole handler for a batch of 100 keys, cache off, over a store
// that answers at once with new memberships: everything a batch costs bigseg but Redis and the
// connection, the body's memory budget included, as cmd/server gives it. (It runs on older
// revisions, which is how BENCHMARKS.md compares them, with Config{}: they had the budget by
// default.)
func BenchmarkHandlerBatch(b *testing.B) {
	h := New(Config{Batches: limit.NewBodies(limit.DefaultBodyMemory).Limit(DefaultMaxBodyBytes, DefaultBodyReadTimeout, BatchUses(0), Error)}, oneService(instantStore{}, segments.Config{NoCache: true}))
	body := []byte(`{"contextKeys":[`)
	for i := range 100 {
		if i > 0 {
			body = append(body, ',')
		}
		body = strconv.AppendQuote(body, "user-"+strconv.Itoa(i))
	}
	body = append(body, "]}"...)
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/memberships", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(w, req)
	}
}

// instantStore answers every context with a new 4-ref membership, at once.
type instantStore struct{}

func (instantStore) Memberships(_ context.Context, hashes []string) []segments.Read {
	reads := make([]segments.Read, len(hashes))
	for i := range reads {
		reads[i].Membership = segments.NewMembership([]string{"beta-users.g3", "early-access.g2", "enterprise.g7"}, []string{"blocked.g1"})
	}
	return reads
}

func (instantStore) Metadata(context.Context) (segments.Metadata, error) {
	return segments.Metadata{LastSynchronized: time.Now()}, nil
}
