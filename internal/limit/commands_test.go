package limit

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// TestCommandConnBounds: a command is read up to its bound, then ErrCommandTooLong, whatever
// the client declared; Next begins the next command with the bound whole again.
func TestCommandConnBounds(t *testing.T) {
	server, client := net.Pipe()
	defer server.Close()
	defer client.Close()
	go client.Write([]byte("0123456789"))
	c := NewCommandConn(server, 4, time.Minute)
	if err := c.Next(0); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if string(got) != "0123" || !errors.Is(err, ErrCommandTooLong) {
		t.Errorf("a 10-byte command bounded to 4: %q, %v; want 4 bytes, then ErrCommandTooLong", got, err)
	}
	c.Next(0)
	buf := make([]byte, 10)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "4567"[:n] {
		t.Errorf("the next command: %q, %v", buf[:n], err)
	}
}

// TestCommandConnTimeout: a command must arrive whole within its timeout once its first byte
// has; before that, it may take up to Next's idle bound to begin.
func TestCommandConnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server, client := net.Pipe()
		defer server.Close()
		defer client.Close()
		c := NewCommandConn(server, 1024, time.Second)
		c.Next(time.Minute)
		go func() {
			time.Sleep(30 * time.Second) // an idle client, within its minute
			client.Write([]byte("*1\r\n"))
		}() // and then nothing more: the rest of the command never comes
		buf := make([]byte, 16)
		if n, err := c.Read(buf); err != nil || n != 4 {
			t.Fatalf("the command's first bytes: %d, %v", n, err)
		}
		start := time.Now()
		_, err := c.Read(buf)
		if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != time.Second { // synctest's clock, exact
			t.Errorf("the rest of the command, never sent: %v after %v; want the deadline after 1s", err, time.Since(start))
		}
	})
}

// TestCommandConnBegun: a command whose first bytes came with the one before must arrive whole
// within its timeout from Begun, not from the first byte read after it (which would let a
// client trickling it in a byte at a time, or never, push the deadline on).
func TestCommandConnBegun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server, client := net.Pipe()
		defer server.Close()
		defer client.Close()
		c := NewCommandConn(server, 1024, time.Second)
		start := time.Now()
		if err := c.Begun(); err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(500 * time.Millisecond)
			client.Write([]byte("$4")) // and then nothing more
		}()
		buf := make([]byte, 16)
		if n, err := c.Read(buf); err != nil || n != 2 {
			t.Fatalf("more of the command: %d, %v", n, err)
		}
		_, err := c.Read(buf)
		if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != time.Second { // synctest's clock, exact
			t.Errorf("the rest of the command, never sent: %v after %v; want the deadline 1s after Begun", err, time.Since(start))
		}
	})
}
