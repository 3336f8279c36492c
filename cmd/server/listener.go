package main

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// How long a connection may hold a slot without using it before the connection limit may
// close it to make room: a new connection that has sent nothing (a client's request arrives
// within milliseconds of its connection), and a kept-alive one between requests.
const (
	silentGrace = 100 * time.Millisecond
	idleGrace   = time.Second
)

// connLimit is a listener that keeps at most max client connections open at once: each costs
// a goroutine, buffers and a file descriptor, and nothing else bounds how many a client may
// open. At the limit, Accept makes room by closing a connection that holds a slot without
// using it: the one silent longest since it connected (past silentGrace), else the one idle
// longest since its last answer (past idleGrace). Only when none is does it wait, leaving new
// connections in the kernel's backlog; a request in progress is bounded by the server's
// timeouts. The server must report connection states to ConnState.
type connLimit struct {
	net.Listener
	slots  chan struct{} // one per open connection
	closed chan struct{}
	once   sync.Once

	mu      sync.Mutex
	waiting map[net.Conn]waiting // connections without a request in progress
}

// waiting is when a connection started waiting, and whether it has been answered before.
type waiting struct {
	since  time.Time
	served bool
}

func newConnLimit(ln net.Listener, max int) *connLimit {
	return &connLimit{Listener: ln, slots: make(chan struct{}, max), closed: make(chan struct{}),
		waiting: make(map[net.Conn]waiting)}
}

// Accept waits for a free slot (making one by closing an unused connection if it can), then
// for a connection.
func (l *connLimit) Accept() (net.Conn, error) {
	var recheck *time.Ticker
	defer func() {
		if recheck != nil {
			recheck.Stop()
		}
	}()
	for {
		select {
		case l.slots <- struct{}{}:
			c, err := l.Listener.Accept()
			if err != nil {
				<-l.slots
				return nil, err
			}
			return &limitedConn{Conn: c, l: l}, nil
		default:
		}
		if l.closeUnused(time.Now()) {
			continue
		}
		if recheck == nil {
			recheck = time.NewTicker(silentGrace / 2)
		}
		select {
		case l.slots <- struct{}{}:
			<-l.slots // a connection closed: take its slot in the loop
		case <-recheck.C: // a waiting connection may have passed its grace
		case <-l.closed:
			return nil, net.ErrClosed
		}
	}
}

// Close closes the listener and ends a waiting Accept.
func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Open is the number of connections open.
func (l *connLimit) Open() int { return len(l.slots) }

// ConnState is the http.Server hook that tells the limit which connections are waiting.
func (l *connLimit) ConnState(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if state != http.StateIdle && state != http.StateNew {
		delete(l.waiting, c)
		return
	}
	l.waiting[c] = waiting{since: time.Now(), served: state == http.StateIdle}
}

// closeUnused closes the connection that has held a slot unused longest past its grace, a
// silent one before an idle one, if any has; closing it frees its slot.
func (l *connLimit) closeUnused(now time.Time) bool {
	l.mu.Lock()
	var victim net.Conn
	var vw waiting
	for c, w := range l.waiting {
		grace := silentGrace
		if w.served {
			grace = idleGrace
		}
		if now.Sub(w.since) < grace {
			continue
		}
		if victim == nil || vw.served && !w.served || vw.served == w.served && w.since.Before(vw.since) {
			victim, vw = c, w
		}
	}
	delete(l.waiting, victim)
	l.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.Close()
	return true
}

// limitedConn gives its slot back when it is closed, once.
type limitedConn struct {
	net.Conn
	l    *connLimit
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.waiting, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}
