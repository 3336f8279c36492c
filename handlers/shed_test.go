package handlers

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestShedderBounds: with a limit of 2, two requests run, two wait, and a fifth is refused at
// once; when the running ones finish, the waiting ones run.
func TestShedderBounds(t *testing.T) {
	s := &server{shedder: newShedder(2, time.Hour)}
	release := make(chan struct{})
	var inside atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done, ok := s.admit(w, r)
		if !ok {
			return
		}
		defer done()
		inside.Add(1)
		<-release
		w.WriteHeader(http.StatusOK)
	})
	serve := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/memberships/x", nil))
		return rec.Code
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waited 5s for %s", what)
			}
			time.Sleep(time.Millisecond) // polling a condition
		}
	}
	codes := make(chan int, 4)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { codes <- serve() })
	}
	waitUntil("two running", func() bool { return inside.Load() == 2 })
	for range 2 {
		wg.Go(func() { codes <- serve() })
	}
	waitUntil("two waiting", func() bool { return len(s.shedder.waiting) == 2 })
	if code := serve(); code != http.StatusTooManyRequests {
		t.Errorf("fifth request: %d, want 429 at once", code)
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a running or waiting request got %d, want 200", c)
		}
	}
	if inside.Load() != 4 {
		t.Errorf("%d requests ran, want 4", inside.Load())
	}
	if len(s.shedder.running) != 0 || len(s.shedder.waiting) != 0 {
		t.Errorf("slots left taken: %d running, %d waiting", len(s.shedder.running), len(s.shedder.waiting))
	}
}
