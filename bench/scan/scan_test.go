package main

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The data is what BENCHMARKS.md describes: 1 to 3 refs a context, a tenth excluding its first
// ref, a 25th with a ref in both sets, and no context without a ref.
func TestMembership(t *testing.T) {
	const n = 3000
	var excluding, both, excludedOnly int
	for i := range n {
		inc, exc := membership(i, 10_000)
		refs := map[any]bool{}
		for _, r := range append(append([]any{}, inc...), exc...) {
			refs[r] = true
		}
		if len(refs) < 1 || len(refs) > 3 {
			t.Fatalf("context %d: %d refs", i, len(refs))
		}
		switch {
		case len(inc) == 0:
			excludedOnly++
			excluding++
		case len(exc) > 0 && exc[0] == inc[0]:
			both++
		case len(exc) > 0:
			excluding++
		}
	}
	if excluding != n/10 || both != n/25 || excludedOnly != n/30 {
		t.Errorf("%d excluding, %d in both, %d excluded only; want %d, %d, %d", excluding, both, excludedOnly, n/10, n/25, n/30)
	}
}

// The paced generator sends exactly the requests its schedule holds, whatever the answers' speed.
func TestPacedSendsTheSchedule(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	res, err := paced(strings.TrimPrefix(srv.URL, "http://"), 200, 2, 500*time.Millisecond, func(*rand.Rand) int { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	if res.requests != 100 || got.Load() != 100 {
		t.Errorf("%d requests answered, %d received; want 100 (200 a second for 0.5 s)", res.requests, got.Load())
	}
}

func TestPacedFailsOnAnErrorStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	if _, err := paced(strings.TrimPrefix(srv.URL, "http://"), 100, 1, 100*time.Millisecond, func(*rand.Rand) int { return 1 }); err == nil {
		t.Error("no error for a 503")
	}
}
