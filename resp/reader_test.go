package resp_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bigseg/bigseg/resp"
)

// dial connects to addr, closing the connection when the test ends.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Commands as clients send them, whole or in pieces, RESP or inline (telnet, redis-cli's
// own inline mode), get exactly Redis's answers.
func TestRESPCommandsAsSent(t *testing.T) {
	addr := serve(t, service(t, contexts), resp.Config{})
	for _, c := range []struct {
		name   string
		writes []string // sent one after the other, each in a write of its own
		want   string
	}{
		{"inline", []string{"PING\r\n"}, "+PONG\r\n"},
		{"inline, LF only", []string{"ping\n"}, "+PONG\r\n"},
		{"inline, double quotes and escapes", []string{`ECHO "a b\x41\n\"" ` + "\r\n"}, "$6\r\na bA\n\"\r\n"},
		{"inline, single quotes", []string{`ECHO 'it\'s "x"'` + "\r\n"}, "$8\r\nit's \"x\"\r\n"},
		{"a blank line, then a command", []string{"\r\n  \r\nPING\r\n"}, "+PONG\r\n"},
		{"an empty and a null array are skipped", []string{"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n"}, "+PONG\r\n"},
		{"a bulk string holding CRLF", []string{"*2\r\n$4\r\nECHO\r\n$4\r\na\r\nb\r\n"}, "$4\r\na\r\nb\r\n"},
		{"pipelined", []string{"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\nPING x\r\n"}, "+PONG\r\n$3\r\nabc\r\n$1\r\nx\r\n"},
		{"in pieces", []string{"*2\r", "\n$4\r\nEC", "HO\r\n$1", "0\r\n0123456789", "\r", "\n"}, "$10\r\n0123456789\r\n"},
		{"the longest command taken", []string{"*2\r\n$4\r\nECHO\r\n$16360\r\n" + strings.Repeat("e", 16360) + "\r\n"},
			"$16360\r\n" + strings.Repeat("e", 16360) + "\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, addr)
			for _, w := range c.writes {
				if _, err := io.WriteString(conn, w); err != nil {
					t.Fatal(err)
				}
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got := make([]byte, len(c.want))
			if _, err := io.ReadFull(conn, got); err != nil {
				t.Fatalf("%v after %q", err, got)
			}
			if string(got) != c.want {
				t.Errorf("answer %q, want %q", got, c.want)
			}
		})
	}
}

// What cannot be read is answered with one error line, then the connection is closed: at
// once for a command whose declared lengths are over the bound, without waiting for the data
// they declare (before, a declared 1 GB bulk string waited for 16 KiB of it, or for the read
// timeout, to be cut off without a word).
func TestRESPRefusedInput(t *testing.T) {
	addr := serve(t, service(t, contexts), resp.Config{ReadTimeout: time.Minute})
	tooLong := "-ERR command too long: more than 16384 bytes: bigseg answers only short commands\r\n"
	for _, c := range []struct {
		name, send, want string
	}{
		{"a declared 1 GB bulk string", "*2\r\n$3\r\nGET\r\n$1000000000\r\n", tooLong},
		{"a declared bulk string just over the bound", "*2\r\n$4\r\nECHO\r\n$16385\r\nabc", tooLong},
		{"a million arguments declared", "*1000000\r\n", tooLong},
		{"arguments that together are over the bound", "*5\r\n" + strings.Repeat("$4000\r\n"+strings.Repeat("e", 4000)+"\r\n", 4) + "$4000\r\n", tooLong},
		{"an inline line past the bound", strings.Repeat("x", 17000), tooLong},
		{"a CR where a bulk string should begin", "*1\r\n\r\n", "-ERR Protocol error: expected '$', got '?'\r\n"},
		{"a bad array length", "*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"a bad bulk length", "*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"a bulk string longer than declared", "*1\r\n$3\r\nPINGG\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"unbalanced quotes", "ECHO \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"a closing quote not followed by a space", "ECHO \"abc\"d\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, addr)
			go io.WriteString(conn, c.send) // may fail once the server closes the connection
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(conn)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("no answer and no close in 10s (got %q)", got)
			}
			if string(got) != c.want {
				t.Errorf("answer %q, want %q", got, c.want)
			}
		})
	}
}

// A client that streams a long pipeline of commands, reading every answer, in writes that
// each end inside a command, makes the listener hold one command's buffer, not what it sent:
// redcon's reader, used before, grew its buffer for as long as a command was unfinished at its
// end, which was hundreds of MB for one connection in a few seconds.
func TestRESPStreamedPipelineHoldsOneBuffer(t *testing.T) {
	addr := serve(t, service(t, contexts), resp.Config{})
	conn := dial(t, addr)
	const commands, argBytes = 4000, 12 << 10
	cmd := "*2\r\n$3\r\nFOO\r\n$12288\r\n" + strings.Repeat("x", argBytes) + "\r\n" // ~12 KiB in, ~150 bytes out
	answered := make(chan error, 1)
	go func() {
		br := bufio.NewReader(conn)
		for range commands {
			line, err := br.ReadSlice('\n')
			if err != nil || !bytes.HasPrefix(line, []byte("-ERR unknown command 'foo'")) {
				answered <- errors.Join(err, errors.New("answer "+string(line)))
				return
			}
		}
		answered <- nil
	}()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	stream := []byte(strings.Repeat(cmd, 8))
	for sent := 0; sent < commands; sent += 8 {
		// Two writes per 8 commands, the first ending 7 bytes short of a command's end.
		if _, err := conn.Write(stream[:len(stream)-7]); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(stream[len(stream)-7:]); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	sent := commands * len(cmd)
	t.Logf("sent %d MiB: heap in use %d KiB before, %d KiB at the peak", sent>>20, base>>10, peak>>10)
	if bound := base + 8<<20; peak > bound { // one connection's buffers are some KiB: 8 MiB is slack for the runtime
		t.Errorf("heap in use peaked at %d MiB streaming %d MiB through one connection, over %d MiB", peak>>20, sent>>20, bound>>20)
	}
}

// A command begun in the same write as whole ones before it (a pipeline cut inside a command)
// must arrive within the read timeout, as one begun in a write of its own must: before, the
// listener answered the whole ones, then waited for more of the socket with the idle bound
// (none by default) while the beginning already sat in its buffer, so the connection stayed
// open for good.
func TestRESPCommandBegunBehindWholeOnesIsTimedOut(t *testing.T) {
	const readTimeout = 250 * time.Millisecond
	addr := serve(t, service(t, contexts), resp.Config{ReadTimeout: readTimeout}) // IdleTimeout 0: none
	for _, c := range []struct {
		name, send string
	}{
		{"RESP", "*1\r\n$4\r\nPING\r\n*2\r\n$8\r\nSMEM"},
		{"inline", "PING\r\nSMEM"},
		{"one byte begun", "PING\r\n*"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, addr)
			if _, err := io.WriteString(conn, c.send); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // 40 read timeouts
			got, err := io.ReadAll(conn)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("still open after 10s, with a read timeout of %v (answered %q)", readTimeout, got)
			}
			if string(got) != "+PONG\r\n" {
				t.Errorf("answered %q, %v; want +PONG, then the connection closed", got, err)
			}
		})
	}
}

// With no idle timeout (the default, as Redis's timeout 0), a connection with nothing begun
// may wait between commands far longer than the read timeout.
func TestRESPIdleConnectionIsNotTimedOut(t *testing.T) {
	const readTimeout = 250 * time.Millisecond
	conn := dial(t, serve(t, service(t, contexts), resp.Config{ReadTimeout: readTimeout}))
	pong := make([]byte, len("+PONG\r\n"))
	for i := range 2 {
		if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
			t.Fatalf("PING %d: %v", i, err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(conn, pong); err != nil || string(pong) != "+PONG\r\n" {
			t.Fatalf("PING %d: %q, %v", i, pong, err)
		}
		if i == 0 { // idle for 4 read timeouts: the server must neither answer nor close
			conn.SetReadDeadline(time.Now().Add(4 * readTimeout))
			n, err := conn.Read(pong)
			if ne, ok := err.(net.Error); n > 0 || !ok || !ne.Timeout() {
				t.Fatalf("idle for %v: read %d bytes, %v; want nothing (the connection open)", 4*readTimeout, n, err)
			}
		}
	}
}
