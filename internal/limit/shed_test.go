package limit

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/apitest"
)

// TestShedderBounds: with a limit of 2, two requests run, two wait, and a fifth is refused at
// once with 429 and Retry-After; when the running ones finish, the waiting ones run.
func TestShedderBounds(t *testing.T) {
	sh := NewShedder(2, time.Hour)
	release := make(chan struct{})
	var inside atomic.Int64
	h := sh.Middleware(refuse)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	serve := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/memberships/x", nil))
		return rec
	}
	codes := make(chan int, 4)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { codes <- serve().Code })
	}
	waitFor(t, "two running", func() bool { return inside.Load() == 2 })
	for range 2 {
		wg.Go(func() { codes <- serve().Code })
	}
	waitFor(t, "two waiting", func() bool { return len(sh.waiting) == 2 })
	if rec := serve(); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("fifth request: %d %v, want 429 with Retry-After at once", rec.Code, rec.Header())
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
	if len(sh.running) != 0 || len(sh.waiting) != 0 {
		t.Errorf("slots left taken: %d running, %d waiting", len(sh.running), len(sh.waiting))
	}
}

// TestSlotsAreFreeWhileAnswersAreWritten: a client that does not read its answer holds no
// slot while the answer waits to be written.
func TestSlotsAreFreeWhileAnswersAreWritten(t *testing.T) {
	h := NewShedder(1, time.Millisecond).Middleware(refuse)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("answer"))
	}))
	stuck := apitest.NewStuckWriter()
	done := make(chan struct{})
	go func() { h.ServeHTTP(stuck, httptest.NewRequest(http.MethodGet, "/", nil)); close(done) }()
	<-stuck.Writing
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	close(stuck.Release)
	<-done
	if rec.Code != http.StatusOK {
		t.Errorf("a request while another answer waits to be written: %d, want 200", rec.Code)
	}
}

func TestShedOff(t *testing.T) {
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if h := NewShedder(0, time.Second).Middleware(refuse)(next); h == nil {
		t.Fatal("no handler")
	}
}
