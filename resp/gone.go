package resp

import (
	"net"
	"syscall"
	"time"
)

// watchEvery is how often a command that waits (for a store read slot, for the store) looks at
// whether its client is still there.
const watchEvery = 20 * time.Millisecond

// watch is armed while a command waits: every watchEvery it peeks at the connection and,
// if its client has closed or reset it, ends the connection's context, which gives up the
// command's wait for a read slot (a miss whose caller has gone is not read) and the rest
// of its pipeline. net/http does the same for a request with a read in the background,
// which a pipelined protocol cannot do without taking the next command's bytes.
func (c *conn) watch() {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	c.waiting = true
	if c.watcher == nil {
		c.watcher = time.AfterFunc(watchEvery, c.look)
	} else {
		c.watcher.Reset(watchEvery)
	}
}

// unwatch disarms watch; once it returns no look is running, so the connection may be read.
func (c *conn) unwatch() {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	c.waiting = false
	c.watcher.Stop()
}

func (c *conn) look() {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if !c.waiting {
		return
	}
	if peerGone(c.nc) {
		c.leave()
		return
	}
	c.watcher.Reset(watchEvery)
}

// peerGone says whether nc's client has closed or reset the connection, without waiting
// and without taking a byte it sent (see peek). A connection it cannot peek at (not a
// socket), or with bytes waiting (the next commands, a TLS close_notify), is taken as there.
func peerGone(nc net.Conn) bool {
	for {
		if sc, ok := nc.(syscall.Conn); ok {
			rc, err := sc.SyscallConn()
			return err == nil && peek(rc)
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return false
		}
		nc = u.NetConn()
	}
}
