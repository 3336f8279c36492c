package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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
// timeouts. The server must report connection states to ConnState, which only touches the
// connection's own fields: a request costs two atomic stores, not a lock.
type connLimit struct {
	net.Listener
	slots  chan struct{} // one per open connection
	closed chan struct{}
	once   sync.Once

	mu    sync.Mutex
	conns map[*limitedConn]struct{} // every open connection
}

func newConnLimit(ln net.Listener, max int) *connLimit {
	return &connLimit{Listener: ln, slots: make(chan struct{}, max), closed: make(chan struct{}),
		conns: make(map[*limitedConn]struct{})}
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
			lc := &limitedConn{Conn: c, l: l}
			lc.waitingSince.Store(time.Now().UnixNano())
			l.mu.Lock()
			l.conns[lc] = struct{}{}
			l.mu.Unlock()
			return lc, nil
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
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateActive:
		lc.waitingSince.Store(0)
	case http.StateIdle:
		lc.served.Store(true)
		lc.waitingSince.Store(time.Now().UnixNano())
	}
}

// closeUnused closes the connection that has held a slot unused longest past its grace, a
// silent one before an idle one, if any has; closing it frees its slot.
func (l *connLimit) closeUnused(now time.Time) bool {
	for {
		victim, since := l.longestUnused(now.UnixNano())
		if victim == nil {
			return false
		}
		if victim.waitingSince.CompareAndSwap(since, 0) { // still unused: close it
			victim.Close()
			return true
		}
	}
}

// longestUnused finds the connection closeUnused should close, and since when it waits.
func (l *connLimit) longestUnused(now int64) (victim *limitedConn, since int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	victimServed := false
	for c := range l.conns {
		ws := c.waitingSince.Load()
		if ws == 0 {
			continue // a request in progress
		}
		served, grace := c.served.Load(), silentGrace
		if served {
			grace = idleGrace
		}
		if now-ws < int64(grace) {
			continue
		}
		if victim == nil || victimServed && !served || victimServed == served && ws < since {
			victim, since, victimServed = c, ws, served
		}
	}
	return victim, since
}

// limitedConn gives its slot back when it is closed, once.
type limitedConn struct {
	net.Conn
	l    *connLimit
	once sync.Once
	// waitingSince is when the connection last began to wait for a request (when it connected
	// or was last answered), in unix nanoseconds; 0 while a request is in progress.
	waitingSince atomic.Int64
	served       atomic.Bool // answered a request before
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}
