package handlers

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

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
		e.result(false, "alice", benchResult)
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
	svc := segments.New(memory.New(f, time.Now()))
	h := New(svc, WithRequestObserver(func(string, string, int, time.Duration) {}))
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
	s := &server{maxBatch: 1000}
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
