package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bigseg/bigseg/segments"
)

// wasCut reads h.wasCut as the budget writes it, under b.mu (synctest's waits are no
// synchronization for the race detector).
func wasCut(b *bodyBudget, h *bodyHold) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return h.wasCut
}

// startRead puts a read in progress on b, as read does, holding held bytes; cut records that it
// was cut.
func startRead(b *bodyBudget, held int64) (rd *bodyHold, cut chan struct{}) {
	cut = make(chan struct{})
	rd = &bodyHold{b: b, since: time.Now(), cut: sync.OnceFunc(func() { close(cut) })}
	b.mu.Lock()
	b.cuttable = append(b.cuttable, rd)
	b.mu.Unlock()
	if err := b.reserve(context.Background(), rd, held, time.Now()); err != nil {
		panic(err)
	}
	return rd, cut
}

// TestBodyBudgetCutsTheOldestRead: with the budget spent, a body that needs memory leaves a
// young read alone, cuts the oldest once it is cutGrace old, and gets the memory once the cut
// request gives it back.
func TestBodyBudgetCutsTheOldestRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBodyBudget(100)
		old, cut := startRead(b, 80)
		young, _ := startRead(b, 0)
		got := make(chan error, 1)
		go func() { got <- b.reserve(context.Background(), young, 50, time.Now().Add(time.Second)) }()

		time.Sleep(cutGrace / 2)
		synctest.Wait()
		select {
		case <-cut:
			t.Fatal("a read younger than cutGrace was cut")
		default:
		}
		<-cut // at cutGrace
		if !b.notCuttable(old) {
			t.Error("doneReading: the cut read does not know it was cut")
		}
		synctest.Wait()
		if len(got) != 0 {
			t.Fatal("memory was given before the cut request gave it back")
		}
		b.giveBack(old)
		if err := <-got; err != nil {
			t.Fatalf("reserve after the cut: %v", err)
		}
		if young.held != 50 || b.free != 50 {
			t.Errorf("held %d, free %d; want 50 and 50", young.held, b.free)
		}
	})
}

// TestBodyBudgetRunsOut: memory held by requests past their reads cannot be cut; a body that
// needs it waits until its deadline, then gets errNoBodyMemory.
func TestBodyBudgetRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBodyBudget(100)
		answering, _ := startRead(b, 100)
		b.notCuttable(answering) // read whole: now being answered
		rd, _ := startRead(b, 0)
		start := time.Now()
		err := b.reserve(context.Background(), rd, 10, start.Add(2*time.Second))
		if !errors.Is(err, errNoBodyMemory) || time.Since(start) != 2*time.Second {
			t.Errorf("reserve: %v after %v, want errNoBodyMemory at the deadline", err, time.Since(start))
		}
	})
}

// TestBodyBudgetWaitersAreNotCut: reads waiting for memory are served in order, and are never
// the ones cut; a read's grace starts over when it gets the memory it waited for.
func TestBodyBudgetWaitersAreNotCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBodyBudget(100)
		stalled, cut := startRead(b, 100)
		first, _ := startRead(b, 0)
		second, _ := startRead(b, 0)
		firstDone, secondDone := make(chan error, 1), make(chan error, 1)
		go func() { firstDone <- b.reserve(context.Background(), first, 60, time.Now().Add(time.Hour)) }()
		synctest.Wait()
		go func() { secondDone <- b.reserve(context.Background(), second, 60, time.Now().Add(time.Hour)) }()
		<-cut // the stalled read, at cutGrace; never the waiting ones
		b.notCuttable(stalled)
		b.giveBack(stalled)
		if err := <-firstDone; err != nil {
			t.Fatalf("first in line: %v", err)
		}
		synctest.Wait()
		if wasCut(b, first) || wasCut(b, second) || len(secondDone) != 0 {
			t.Fatalf("first cut %v, second cut %v, second served %v: want the second to wait", wasCut(b, first), wasCut(b, second), len(secondDone))
		}
		time.Sleep(cutGrace) // the first has held its memory for cutGrace: now it may be cut
		synctest.Wait()
		if !wasCut(b, first) {
			t.Fatal("a read holding memory for cutGrace while another waits was not cut")
		}
		b.notCuttable(first)
		b.giveBack(first)
		if err := <-secondDone; err != nil {
			t.Errorf("second in line: %v", err)
		}
	})
}

// TestStalledBodyIsCutForAnother runs the handler over real connections, with room for one
// body: a client that sends most of its body and stalls is cut off (408) when another's body
// needs the memory, and the other is answered.
func TestStalledBodyIsCutForAnother(t *testing.T) {
	s := newServer(segments.New(emptyStore{}), []Option{WithMaxBodyBytes(40_000), WithMaxBatch(10), WithBodyMemory(100_000)})
	s.routes(s.mux)
	srv := httptest.NewServer(s.mux)
	defer srv.Close()

	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /memberships HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 39000\r\n\r\n{%q:[", "contextHashes")
	conn.Write([]byte(strings.Repeat(" ", 35_000)))
	waitFor(t, "the stalled body to hold its memory", func() bool {
		s.bodies.mu.Lock()
		defer s.bodies.mu.Unlock()
		return len(s.bodies.cuttable) == 1 && s.bodies.cuttable[0].held == 40_001-freeBodyBytes
	})

	body := `{"contextKeys":["alice"]` + strings.Repeat(" ", 38_000) + "}"
	resp, err := http.Post(srv.URL+"/memberships", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the complete body: %d, want 200", resp.StatusCode)
	}
	stalled, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(stalled), "HTTP/1.1 408") || !strings.Contains(string(stalled), "cut off") {
		t.Errorf("the stalled body: %q, want a 408 saying it was cut off", stalled)
	}
}

// TestSlotsAreFreeWhileAnswersAreWritten: a client that does not read its answer holds no
// lookup slot while the answer waits to be written.
func TestSlotsAreFreeWhileAnswersAreWritten(t *testing.T) {
	h := New(segments.New(emptyStore{}), WithLoadShedding(1, time.Millisecond))
	for _, req := range []func() *http.Request{
		func() *http.Request { return httptest.NewRequest(http.MethodGet, "/memberships/alice", nil) },
		func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/memberships", strings.NewReader(`{"contextKeys":["alice"]}`))
			r.Header.Set("Content-Type", "application/json")
			return r
		},
	} {
		stuck := &stuckWriter{ResponseRecorder: httptest.NewRecorder(), writing: make(chan struct{}), release: make(chan struct{})}
		done := make(chan struct{})
		go func() { h.ServeHTTP(stuck, req()); close(done) }()
		<-stuck.writing
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req())
		close(stuck.release)
		<-done
		if rec.Code != http.StatusOK {
			t.Errorf("%s %s while another answer waits to be written: %d, want 200", req().Method, req().URL, rec.Code)
		}
	}
}

// stuckWriter is a ResponseWriter whose writes wait for release, like a client reading
// nothing, or fail once a write deadline has passed.
type stuckWriter struct {
	*httptest.ResponseRecorder
	once     sync.Once
	writing  chan struct{}
	release  chan struct{}
	cutOnce  sync.Once
	cut      atomic.Bool
	deadline chan struct{} // closed when a past write deadline is set
}

func (s *stuckWriter) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.writing) })
	s.cutOnce.Do(func() { s.deadline = make(chan struct{}) })
	select {
	case <-s.release:
		return s.ResponseRecorder.Write(p)
	case <-s.deadline:
		return 0, os.ErrDeadlineExceeded
	}
}

// WriteString hides the recorder's own, which would not wait.
func (s *stuckWriter) WriteString(str string) (int, error) { return s.Write([]byte(str)) }

// SetWriteDeadline is what http.ResponseController calls: once t passes, writes fail.
func (s *stuckWriter) SetWriteDeadline(t time.Time) error {
	s.cutOnce.Do(func() { s.deadline = make(chan struct{}) })
	expire := func() {
		if s.cut.CompareAndSwap(false, true) {
			close(s.deadline)
		}
	}
	if t.IsZero() {
		return nil
	}
	if d := time.Until(t); d > 0 {
		time.AfterFunc(d, expire)
	} else {
		expire()
	}
	return nil
}

// Flush is what http.ResponseController calls.
func (s *stuckWriter) Flush() {}

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
// budget, for its body and its lookups, until it is answered.
func TestBatchHoldsMemoryForItsLookups(t *testing.T) {
	s := newServer(segments.New(emptyStore{}), []Option{WithBodyMemory(DefaultBodyMemory)})
	s.routes(s.mux)
	body := `{"contextKeys":["k"` + strings.Repeat(`,"k"`, 999) + `]}`
	req := httptest.NewRequest(http.MethodPost, "/memberships", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	stuck := &stuckWriter{ResponseRecorder: httptest.NewRecorder(), writing: make(chan struct{}), release: make(chan struct{})}
	done := make(chan struct{})
	go func() { s.mux.ServeHTTP(stuck, req); close(done) }()
	<-stuck.writing
	s.bodies.mu.Lock()
	held := DefaultBodyMemory - s.bodies.free
	s.bodies.mu.Unlock()
	close(stuck.release)
	<-done
	if want := int64(1000 * lookupBytes); held < want {
		t.Errorf("a batch of 1,000 keys holds %d bytes while it is answered, want at least %d", held, want)
	}
	if s.bodies.free != DefaultBodyMemory || stuck.Code != http.StatusOK {
		t.Errorf("after the answer (%d): %d bytes free, want all %d", stuck.Code, s.bodies.free, DefaultBodyMemory)
	}
}

// TestUnreadAnswerIsCutForAnother: a batch whose answer is not being read keeps its memory
// only until another batch needs it: then its write is cut off (its deadline moves to now)
// and the other is answered.
func TestUnreadAnswerIsCutForAnother(t *testing.T) {
	s := newServer(segments.New(emptyStore{}), []Option{WithMaxBodyBytes(40_000), WithBodyMemory(0)})
	s.routes(s.mux)
	body := `{"contextKeys":["k"` + strings.Repeat(`,"k"`, 999) + `]}`
	newReq := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/memberships", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	stuck := &stuckWriter{ResponseRecorder: httptest.NewRecorder(), writing: make(chan struct{}), release: make(chan struct{})}
	done := make(chan struct{})
	go func() { s.mux.ServeHTTP(stuck, newReq()); close(done) }()
	<-stuck.writing

	rec := httptest.NewRecorder()
	s.mux.ServeHTTP(rec, newReq())
	<-done
	if rec.Code != http.StatusOK {
		t.Errorf("the batch that waited for memory: %d %s, want 200", rec.Code, rec.Body)
	}
	if !stuck.cut.Load() {
		t.Error("the unread answer's write was not cut")
	}
}

// TestUnreadStreamEnds: a status stream whose client reads nothing ends once a write has
// waited for the stream write timeout, and gives its slot back.
func TestUnreadStreamEnds(t *testing.T) {
	s := newServer(segments.New(emptyStore{}), []Option{WithMaxStreams(1), WithHeartbeat(time.Millisecond)})
	s.streamWriteTimeout = 50 * time.Millisecond
	s.routes(s.mux)
	stuck := &stuckWriter{ResponseRecorder: httptest.NewRecorder(), writing: make(chan struct{}), release: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		s.mux.ServeHTTP(stuck, httptest.NewRequest(http.MethodGet, "/status/stream", nil))
		close(done)
	}()
	<-stuck.writing
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang detector
		t.Fatal("the unread stream still runs 10 s on")
	}
	if len(s.streams) != 0 {
		t.Errorf("%d stream slots still taken", len(s.streams))
	}
}
