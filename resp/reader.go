package resp

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/bigseg/bigseg/internal/limit"
)

// reader reads a client's commands, RESP arrays of bulk strings or inline commands (as typed
// into telnet), into a buffer of its own that grows to a bound and no further: a command that
// cannot fit in it, whether it says so up front (a bulk string of a declared 1 GB) or only goes
// on arriving, is limit.ErrCommandTooLong, so that the bound is all that any client, whatever it
// sends, makes the listener hold for its commands. (redcon's reader, used before, doubles its buffer
// whenever a command is unfinished at its end and never gives back what it has parsed, so a
// client streaming a pipeline made one connection hold hundreds of megabytes.)
type reader struct {
	rd         io.Reader
	max        int    // the bound of buf, and of a command
	buf        []byte // begins small: most connections send only short commands
	start, end int    // buf[start:end] has arrived and is not parsed yet
	// need is how many bytes buf[start:] must hold before the command there may be whole:
	// parsing again before is wasted (a bulk string trickling in is parsed once, not per read).
	need int
	err  error      // the read error met, returned once what came before it is parsed
	cmds [][][]byte // the commands returned by next, reused
	args [][]byte   // the arguments of the command being parsed, reused
}

// readerStart is the size a reader's buffer begins with.
const readerStart = 4 << 10

func newReader(rd io.Reader, bound int) *reader {
	return &reader{rd: rd, max: bound, buf: make([]byte, min(readerStart, bound))}
}

// next returns the commands whole in what has arrived, reading until there is at least one.
// Their arguments point into the buffer: they are good until the next call.
func (r *reader) next() ([][][]byte, error) {
	r.cmds = r.cmds[:0]
	for {
		for r.start < r.end && r.end-r.start >= r.need {
			args, n, err := r.parse(r.buf[r.start:r.end])
			if err != nil {
				return nil, err
			}
			if n == 0 {
				break // incomplete: r.need says how much more it needs
			}
			r.start, r.need = r.start+n, 0
			if len(args) > 0 {
				r.cmds = append(r.cmds, args)
			}
		}
		if len(r.cmds) > 0 {
			return r.cmds, nil
		}
		if r.err != nil {
			return nil, r.err
		}
		if r.start > 0 { // keep only the command begun, at the start
			r.end = copy(r.buf, r.buf[r.start:r.end])
			r.start = 0
		}
		if r.need > len(r.buf) || r.end == len(r.buf) {
			if r.need > r.max || len(r.buf) == r.max {
				return nil, fmt.Errorf("%w: more than %d bytes", limit.ErrCommandTooLong, r.max)
			}
			buf := make([]byte, min(r.max, max(2*len(r.buf), r.need)))
			copy(buf, r.buf[:r.end])
			r.buf = buf
		}
		n, err := r.rd.Read(r.buf[r.end:])
		r.end += n
		r.err = err
	}
}

// begun says whether what has arrived holds the beginning of a command (next returns every
// whole one, so at most the beginning of one is left).
func (r *reader) begun() bool { return r.start < r.end }

// protocolError is a command the protocol cannot read; the client is told, then the
// connection is closed, as Redis does.
type protocolError string

func (e protocolError) Error() string { return "Protocol error: " + string(e) }

// parse reads the command at the start of b: its arguments (none for an empty one, which is
// skipped) and its length. A length of 0 means b holds only the beginning of it; r.need is
// then the length b must reach before it may hold all of it.
func (r *reader) parse(b []byte) (args [][]byte, n int, err error) {
	if b[0] != '*' {
		return r.parseInline(b)
	}
	line, pos, ok := r.line(b, 1)
	if !ok {
		return nil, 0, nil
	}
	count, ok := parseInt(line)
	switch {
	case !ok:
		return nil, 0, protocolError("invalid multibulk length")
	case count <= 0: // an empty (or null) array: no command, as Redis has it
		return nil, pos, nil
	case count > (r.max-pos)/len("$0\r\n\r\n"): // more than can fit
		r.need = math.MaxInt
		return nil, 0, nil
	}
	r.args = r.args[:0]
	for range count {
		if pos == len(b) {
			r.need = pos + 1
			return nil, 0, nil
		}
		if b[pos] != '$' {
			return nil, 0, protocolError("expected '$', got '" + printable(string(b[pos:pos+1])) + "'")
		}
		line, next, ok := r.line(b, pos+1)
		if !ok {
			return nil, 0, nil
		}
		size, ok := parseInt(line)
		switch {
		case !ok || size < 0:
			return nil, 0, protocolError("invalid bulk length")
		case size > r.max: // its length alone is too long: no need to wait for it
			r.need = math.MaxInt
			return nil, 0, nil
		case next+size+2 > len(b):
			r.need = next + size + 2
			return nil, 0, nil
		case b[next+size] != '\r' || b[next+size+1] != '\n':
			return nil, 0, protocolError("invalid bulk length")
		}
		r.args = append(r.args, b[next:next+size])
		pos = next + size + 2
	}
	return slices.Clone(r.args), pos, nil
}

// line returns the line of b that begins at from, without its CRLF, and where the next
// begins; ok is false (and r.need set) when its end has not arrived yet.
func (r *reader) line(b []byte, from int) (line []byte, next int, ok bool) {
	i := bytes.IndexByte(b[from:], '\n')
	if i < 0 {
		r.need = len(b) + 1
		return nil, 0, false
	}
	line = b[from : from+i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, from + i + 1, true
}

// parseInt reads a RESP length: an optional minus sign and at most 18 decimal digits.
func parseInt(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// parseInline reads an inline command: one line of arguments split at spaces, which may be
// quoted as Redis allows ("..." with backslash escapes, '...' with \' only).
func (r *reader) parseInline(b []byte) (args [][]byte, n int, err error) {
	line, n, ok := r.line(b, 0)
	if !ok {
		return nil, 0, nil
	}
	for p := 0; ; {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p == len(line) {
			return args, n, nil
		}
		var arg []byte
		switch line[p] {
		case '"', '\'':
			arg, p, ok = unquote(line, p)
			if !ok {
				return nil, 0, protocolError("unbalanced quotes in request")
			}
		default:
			start := p
			for p < len(line) && !isSpace(line[p]) {
				p++
			}
			arg = slices.Clone(line[start:p])
		}
		args = append(args, arg)
	}
}

// unquote reads the quoted argument that begins at line[p], and returns where it ends; ok is
// false when its closing quote is missing, or is not followed by a space or the line's end.
func unquote(line []byte, p int) (arg []byte, end int, ok bool) {
	q := line[p]
	arg = []byte{}
	for p++; p < len(line); p++ {
		c := line[p]
		switch {
		case c == q:
			if p+1 < len(line) && !isSpace(line[p+1]) {
				return nil, 0, false
			}
			return arg, p + 1, true
		case c == '\\' && q == '"' && p+3 < len(line) && line[p+1] == 'x' && isHex(line[p+2]) && isHex(line[p+3]):
			arg = append(arg, unhex(line[p+2])<<4|unhex(line[p+3]))
			p += 3
		case c == '\\' && q == '"' && p+1 < len(line):
			p++
			c = line[p]
			switch c {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'a':
				c = '\a'
			}
			arg = append(arg, c)
		case c == '\\' && q == '\'' && p+1 < len(line) && line[p+1] == '\'':
			p++
			arg = append(arg, '\'')
		default:
			arg = append(arg, c)
		}
	}
	return nil, 0, false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
