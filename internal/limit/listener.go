package limit

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// How long a connection may hold a slot without using it before the connection limit may
// close it to make room: a new connection that has not sent a whole request header yet (a
// client's request arrives within milliseconds of its connection; this is what cuts off
// slowloris), and a kept-alive one between requests.
// And how long a write may be stuck (the client takes none of its answers: pipelined
// requests whose answers it never reads fill the socket buffers) before the connection may be
// closed likewise.
const (
	silentGrace = 100 * time.Millisecond
	idleGrace   = time.Second
	stuckGrace  = time.Second
)

// Listener is a net.Listener that keeps at most max client connections open at once: each costs
// a goroutine, buffers and a file descriptor, and nothing else bounds how many a client may
// open. At the limit, Accept makes room by closing a connection that holds a slot without
// using it: the one silent longest since it connected (past silentGrace), else the one idle
// longest since its last answer (past idleGrace), else the one whose client has taken nothing
// of its answer longest (a write stuck past stuckGrace). Only when none is does it wait,
// leaving new connections in the kernel's backlog; a request in progress is bounded by the
// server's timeouts. The server must report connection states to ConnState, which only
// touches the connection's own fields: a request costs a few atomic stores, not a lock.
//
// Its connections still offer CloseWrite when the wrapped ones do, so that net/http can
// half-close a connection after refusing a request (a 431, a 413) and let the client read the
// answer, instead of resetting it.
type Listener struct {
	net.Listener
	max    int
	slots  chan struct{} // one per open connection
	closed chan struct{}
	once   sync.Once
	clock  func() time.Time // time.Now, but in tests (see newListener)
	start  time.Time        // the clock's origin (see now)

	mu    sync.Mutex
	conns map[*limitedConn]struct{} // every open connection
}

// NewListener limits ln to max connections open at once.
func NewListener(ln net.Listener, max int) *Listener { return newListener(ln, max, time.Now) }

// newListener is NewListener with the clock of the graces after which a connection counts as
// unused, so that tests move time instead of waiting for it.
func newListener(ln net.Listener, max int, clock func() time.Time) *Listener {
	return &Listener{Listener: ln, max: max, slots: make(chan struct{}, max), closed: make(chan struct{}),
		conns: make(map[*limitedConn]struct{}), clock: clock, start: clock()}
}

// now is the listener's clock: nanoseconds since it was made, never 0, on the monotonic
// clock (time.Now's), so that a step of the wall clock (NTP) can neither make a connection
// look unused nor spare one.
func (l *Listener) now() int64 { return int64(l.clock().Sub(l.start)) + 1 }

// Accept waits for a free slot (making one by closing an unused connection if it can), then
// for a connection.
func (l *Listener) Accept() (net.Conn, error) {
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
			lc.waitingSince.Store(l.now())
			l.mu.Lock()
			l.conns[lc] = struct{}{}
			l.mu.Unlock()
			return lc, nil
		default:
		}
		if l.closeUnused(l.now()) {
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
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Open is the number of client connections open (not the slots taken: a waiting Accept
// holds one for the connection it has not accepted yet).
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// ConnState is the http.Server hook that tells the limit which connections are waiting.
func (l *Listener) ConnState(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateActive:
		l.Busy(c, true)
	case http.StateIdle:
		l.Busy(c, false)
	}
}

// Busy tells the limit that a request is in progress on c (busy), or that c waits for the
// next one: a server that is not net/http (the Redis protocol) calls it around each command.
func (l *Listener) Busy(c net.Conn, busy bool) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	if busy {
		lc.waitingSince.Store(0)
		return
	}
	lc.served.Store(true)
	lc.waitingSince.Store(l.now())
}

// closeUnused closes the connection that has held a slot unused longest past its grace, a
// silent one before an idle one before a stuck one, if any has; closing it frees its slot.
func (l *Listener) closeUnused(now int64) bool {
	for {
		victim, since, stuck := l.longestUnused(now)
		if victim == nil {
			return false
		}
		// Still unused? (A stuck write that ends now is no reason to spare its client.)
		if stuck && victim.writingSince.Load() == since || !stuck && victim.waitingSince.CompareAndSwap(since, 0) {
			victim.Close()
			return true
		}
	}
}

// longestUnused finds the connection closeUnused should close, since when it is unused, and
// whether it is a stuck write.
func (l *Listener) longestUnused(now int64) (victim *limitedConn, since int64, stuck bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	victimRank := 0
	for c := range l.conns {
		s, rank, ok := c.unused(now)
		if ok && (victim == nil || rank < victimRank || rank == victimRank && s < since) {
			victim, since, victimRank = c, s, rank
		}
	}
	return victim, since, victimRank == rankStuck
}

// How a connection holds its slot unused, in the order they are closed.
const (
	rankSilent = iota
	rankIdle
	rankStuck
)

// unused says since when c holds its slot unused, and how, if it has for its grace.
func (c *limitedConn) unused(now int64) (since int64, rank int, ok bool) {
	if ws := c.waitingSince.Load(); ws != 0 {
		if c.served.Load() {
			return ws, rankIdle, now-ws >= int64(idleGrace)
		}
		return ws, rankSilent, now-ws >= int64(silentGrace)
	}
	if ws := c.writingSince.Load(); ws != 0 {
		return ws, rankStuck, now-ws >= int64(stuckGrace)
	}
	return 0, 0, false
}

// limitedConn gives its slot back when it is closed, once.
type limitedConn struct {
	net.Conn
	l    *Listener
	once sync.Once
	// waitingSince is when the connection last began to wait for a request (when it connected
	// or was last answered), by Listener.now; 0 while a request is in progress.
	waitingSince atomic.Int64
	served       atomic.Bool  // answered a request before
	writingSince atomic.Int64 // when the write in progress began; 0 when none is
}

// Write notes when a write is in progress, so that one the client never takes can be found.
func (c *limitedConn) Write(b []byte) (int, error) {
	c.writingSince.Store(c.l.now())
	n, err := c.Conn.Write(b)
	c.writingSince.Store(0)
	return n, err
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

// NetConn is the wrapped connection, as tls.Conn's NetConn is: resp peeks through it at
// whether a waiting command's client is still there.
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection when the wrapped one can (a TCP connection): net/http
// does so after refusing a request whose body it will not read, then waits a moment for the
// client to read the answer before closing.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
