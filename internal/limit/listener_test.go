package limit

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// serveLimited serves h on a loopback listener limited to max connections, on the clock now,
// until the test ends.
func serveLimited(t *testing.T, max int, h http.Handler, now func() time.Time) (*Listener, string) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newListener(raw, max, now)
	srv := &http.Server{Handler: h, ConnState: l.ConnState, MaxHeaderBytes: 4096}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l, raw.Addr().String()
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// get sends a GET on c and reads its answer's status.
func get(t *testing.T, c net.Conn) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestListenerClosesUnusedConnectionsToMakeRoom: at the limit, the listener makes room for the
// next connection by closing one that holds its slot unused past its grace: a silent one
// (100 ms) before an idle one (1 s); a connection whose request is in progress is never closed.
func TestListenerClosesUnusedConnectionsToMakeRoom(t *testing.T) {
	var clock atomic.Int64 // nanoseconds past base
	base := time.Now()
	now := func() time.Time { return base.Add(time.Duration(clock.Load())) }
	release := make(chan struct{})
	busy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
	})
	l, addr := serveLimited(t, 3, busy, now)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	inProgress := dial()
	io.WriteString(inProgress, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	idle := dial()
	if code := get(t, idle); code != 200 {
		t.Fatal(code)
	}
	silent := dial()
	waitFor(t, "three connections", func() bool { return l.Open() == 3 })
	waitFor(t, "the request in progress", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for c := range l.conns {
			if c.waitingSince.Load() == 0 {
				return true
			}
		}
		return false
	})

	clock.Add(int64(silentGrace)) // the silent one is past its grace, the idle one not yet
	first := dial()
	if code := get(t, first); code != 200 {
		t.Fatalf("the fourth connection: %d", code)
	}
	if !closed(silent) || closed(idle) {
		t.Fatalf("to make room: silent closed %v, idle closed %v; want the silent one first", closed(silent), closed(idle))
	}
	clock.Add(int64(idleGrace))
	if code := get(t, dial()); code != 200 {
		t.Fatal("the fifth connection")
	}
	if !closed(idle) {
		t.Error("the idle connection was not closed to make room")
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(inProgress), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("the request in progress: %v %v, want it answered", resp, err)
	}
}

// closed says whether the server closed c: a read finds EOF (or a reset) at once.
func closed(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// TestListenerWaitsWhenNothingIsUnused: with every slot in use, a new connection waits in the
// backlog until one closes, then is served.
func TestListenerWaitsWhenNothingIsUnused(t *testing.T) {
	release := make(chan struct{})
	l, addr := serveLimited(t, 1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }), time.Now)
	held, _ := net.Dial("tcp", addr)
	defer held.Close()
	io.WriteString(held, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	waitFor(t, "the held connection", func() bool { return l.Open() == 1 })
	answered := make(chan int, 1)
	go func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			answered <- 0
			return
		}
		defer c.Close()
		answered <- get(t, c)
	}()
	select {
	case code := <-answered:
		t.Fatalf("a connection beyond the limit was served at once: %d", code)
	case <-time.After(300 * time.Millisecond): // it must still be waiting: nothing to assert sooner
	}
	close(release)
	if code := <-answered; code != 200 {
		t.Errorf("the waiting connection once a slot freed: %d", code)
	}
	if l.Open() > 1 {
		t.Errorf("%d connections open, over the limit of 1", l.Open())
	}
}

// TestRefusedHeaderIsReadByTheClient: after a 431 for a header too large, net/http half-closes
// the connection (FIN), so the client reads the whole answer and then EOF, never a reset: the
// limited connection still offers CloseWrite.
func TestRefusedHeaderIsReadByTheClient(t *testing.T) {
	_, addr := serveLimited(t, 10, ok, time.Now)
	for range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 70<<10)+"\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		answer, err := io.ReadAll(c)
		c.Close()
		if !strings.HasPrefix(string(answer), "HTTP/1.1 431") || err != nil {
			t.Fatalf("a 70 KB header: %q, %v; want the 431, then EOF", answer, err)
		}
	}
	var lc net.Conn = &limitedConn{}
	if _, ok := lc.(interface{ CloseWrite() error }); !ok {
		t.Error("a limited connection does not offer CloseWrite")
	}
}
