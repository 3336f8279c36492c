package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// bench/instr divides by the number of requests sent: it must be exact, over every connection.
func TestSendsExactlyN(t *testing.T) {
	var got atomic.Int64
	keys := make(map[string]bool)
	seen := make(chan string, 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		seen <- strings.TrimPrefix(r.URL.Path, "/environments/e/memberships/")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for c := range 3 {
		if err := send(addr, "/environments/e", c, 3, 100, 7); err != nil {
			t.Fatal(err)
		}
	}
	close(seen)
	for k := range seen {
		keys[k] = true
	}
	if got.Load() != 100 || len(keys) != 7 || !keys["user-6"] {
		t.Errorf("%d requests over %d keys, want 100 over 7", got.Load(), len(keys))
	}
}

func TestFailsOnAnErrorStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	if err := send(strings.TrimPrefix(srv.URL, "http://"), "", 0, 1, 5, 5); err == nil {
		t.Error("no error for a 503")
	}
}
