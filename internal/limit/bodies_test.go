package limit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bigseg/bigseg/internal/apitest"
)

// wasCut reads h.wasCut as the budget writes it, under b.mu (synctest's waits are no
// synchronization for the race detector).
func wasCut(b *Bodies, h *bodyHold) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return h.wasCut
}

// startRead puts a read in progress on b, as read does, holding held bytes; cut records that it
// was cut.
func startRead(b *Bodies, held int64) (rd *bodyHold, cut chan struct{}) {
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
		b := NewBodies(100)
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
		b := NewBodies(100)
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
		b := NewBodies(100)
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

// refuse is a Refuse for tests: the code and message as plain text, connection closed.
func refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}

// answer is a next handler that answers with the length of the body it was given.
var answer = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, ok := r.Body.(interface{ Bytes() []byte })
	if !ok {
		http.Error(w, "no body", http.StatusInternalServerError)
		return
	}
	fmt.Fprint(w, len(body.Bytes()))
})

// noUses is what a next handler that needs no memory of its own uses.
func noUses(int64) int64 { return 0 }

func TestLimitRefusals(t *testing.T) {
	h := NewBodies(1<<20).Limit(100, time.Second, noUses, refuse)(answer)
	for _, c := range []struct {
		name string
		req  func() *http.Request
		code int
		body string
	}{
		{"within the limit", func() *http.Request { return httptest.NewRequest("POST", "/", strings.NewReader("0123456789")) }, 200, "10"},
		{"declared too large", func() *http.Request {
			return httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", 101)))
		}, 413, "larger than 100 bytes"},
		{"too large without a length", func() *http.Request {
			r := httptest.NewRequest("POST", "/", io.NopCloser(strings.NewReader(strings.Repeat("x", 101))))
			r.ContentLength = -1
			return r
		}, 413, "larger than 100 bytes"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, c.req())
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.body) {
			t.Errorf("%s: %d %q, want %d %q", c.name, rec.Code, rec.Body, c.code, c.body)
		}
	}
}

// TestStalledBodyIsCutForAnother runs the middleware over real connections, with room for
// one body: a client that sends most of its body and stalls is cut off (408) when another's
// body needs the memory, and the other is answered.
func TestStalledBodyIsCutForAnother(t *testing.T) {
	b := NewBodies(0) // grown to what one body of the limit needs
	srv := httptest.NewServer(b.Limit(40_000, time.Minute, noUses, refuse)(answer))
	defer srv.Close()

	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 39000\r\n\r\n")
	conn.Write([]byte(strings.Repeat(" ", 35_000)))
	waitFor(t, "the stalled body to hold its memory", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.cuttable) == 1 && b.cuttable[0].held == 40_001-freeBodyBytes
	})

	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(strings.Repeat(" ", 39_000)))
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

// TestLimitHoldsWhatNextUses: a request holds memory for its body and what next uses of it,
// as uses says, until it is answered, and gives it all back after.
func TestLimitHoldsWhatNextUses(t *testing.T) {
	const budget, uses = 1 << 20, 256_000
	b := NewBodies(budget)
	h := b.Limit(40_000, time.Minute, func(int64) int64 { return uses }, refuse)(answer)
	stuck := apitest.NewStuckWriter()
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(stuck, httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("k", 4000))))
		close(done)
	}()
	<-stuck.Writing
	b.mu.Lock()
	held := budget - b.free
	b.mu.Unlock()
	close(stuck.Release)
	<-done
	if want := int64(uses + 4000 - freeBodyBytes); held < want { // a body's first freeBodyBytes are free
		t.Errorf("a request whose next uses %d bytes holds %d while it is answered, want at least %d", uses, held, want)
	}
	if b.free != budget || stuck.Code != http.StatusOK {
		t.Errorf("after the answer (%d): %d bytes free, want all %d", stuck.Code, b.free, budget)
	}
}

// TestUnreadAnswerIsCutForAnother: a request whose answer is not being read keeps its memory
// only until another needs it: then its write is cut off (its deadline moves to now) and the
// other is answered.
func TestUnreadAnswerIsCutForAnother(t *testing.T) {
	b := NewBodies(0)
	h := b.Limit(40_000, time.Minute, func(int64) int64 { return 300_000 }, refuse)(answer)
	newReq := func() *http.Request { return httptest.NewRequest("POST", "/", strings.NewReader("body")) }
	stuck := apitest.NewStuckWriter()
	done := make(chan struct{})
	go func() { h.ServeHTTP(stuck, newReq()); close(done) }()
	<-stuck.Writing

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, newReq())
	<-done
	if rec.Code != http.StatusOK {
		t.Errorf("the request that waited for memory: %d %s, want 200", rec.Code, rec.Body)
	}
	if !stuck.Cut() {
		t.Error("the unread answer's write was not cut")
	}
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
