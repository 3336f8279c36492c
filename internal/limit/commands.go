package limit

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// ErrCommandTooLong is the error of a read past a command's bound.
var ErrCommandTooLong = errors.New("command too long")

// CommandConn bounds what a client of a protocol that gives no length up front (the Redis
// protocol: a command is read until it is whole) can make the server read for one command: at
// most max bytes, and, once its first byte has arrived, within timeout. So a declared 1 GB
// argument costs what arrives of it, at most max, and a command sent a byte a second is cut
// off. Next begins each command, or Begun one whose first bytes came with the one before.
type CommandConn struct {
	net.Conn
	max     int
	timeout time.Duration
	read    int
	started bool
}

// NewCommandConn bounds the commands read from c.
func NewCommandConn(c net.Conn, max int, timeout time.Duration) *CommandConn {
	return &CommandConn{Conn: c, max: max, timeout: timeout}
}

// Next begins a command: it may take up to idle (0: no bound) to begin arriving.
func (c *CommandConn) Next(idle time.Duration) error {
	c.read, c.started = 0, false
	var deadline time.Time
	if idle > 0 {
		deadline = time.Now().Add(idle)
	}
	return c.Conn.SetReadDeadline(deadline)
}

// Begun begins a command whose first bytes have arrived already, read with the commands before
// it: the rest of it must arrive within timeout from now, however long the connection may idle
// between commands (a client must not hold it open with half a command pipelined behind whole ones).
func (c *CommandConn) Begun() error {
	c.read, c.started = 0, true
	return c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
}

// Read reads no more than what is left of the command's bound; past it, ErrCommandTooLong.
func (c *CommandConn) Read(p []byte) (int, error) {
	if c.read >= c.max {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrCommandTooLong, c.max)
	}
	p = p[:min(len(p), c.max-c.read)]
	n, err := c.Conn.Read(p)
	if n > 0 && !c.started {
		c.started = true
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
	}
	c.read += n
	return n, err
}
