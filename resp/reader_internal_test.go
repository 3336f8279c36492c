package resp

import (
	"github.com/bigseg/bigseg/segments"

	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/redcon"
)

// chunked reads b at most n bytes at a time, as a slow network delivers it.
type chunked struct {
	b []byte
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// Any input, in any pieces, is read without a panic, into commands of one argument or more,
// or refused.
func FuzzRESPReader(f *testing.F) {
	for _, s := range []string{"*1\r\n$4\r\nPING\r\n", "PING\r\n", "ECHO \"a\\x41\" 'b\\''\r\n", "*2\r\n$1000000000\r\n",
		"*0\r\n*-1\r\n", "*1\r\n\r\n", "*3\r\n$1\r\na\r\n$0\r\n\r\n$2\r\nbc\r\n", "\r\n\r\n"} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		r := newReader(&chunked{b: in, n: int(chunk)%16 + 1}, 256)
		for range len(in) + 1 {
			cmds, err := r.next()
			if err != nil {
				return
			}
			for _, args := range cmds {
				if len(args) == 0 {
					t.Fatal("an empty command")
				}
			}
		}
		t.Fatal("more commands than bytes")
	})
}

// Arguments encoded as clients encode them, pipelined and in pieces, are read back as sent;
// inline, those without spaces or quotes are too.
func FuzzRESPReaderRoundTrip(f *testing.F) {
	f.Add("GET\x00launchdarkly:big_segments_synchronized_on", uint8(1))
	f.Add("ECHO\x00\r\n\x00", uint8(7))
	f.Fuzz(func(t *testing.T, joined string, chunk uint8) {
		args := strings.Split(joined, "\x00")
		var cmd []byte
		cmd = redcon.AppendArray(cmd, len(args))
		for _, a := range args {
			cmd = redcon.AppendBulkString(cmd, a)
		}
		inline := !strings.ContainsAny(joined, " \t\r\n\v\f\"'") && !strings.HasPrefix(joined, "*") && !slices.Contains(args, "")
		stream := slices.Concat(cmd, cmd)
		if inline {
			stream = append(stream, strings.Join(args, " ")+"\r\n"...)
		}
		r := newReader(&chunked{b: stream, n: int(chunk)%32 + 1}, 1<<16)
		var got [][]string
		for {
			cmds, err := r.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%q: %v", stream, err)
			}
			for _, c := range cmds {
				var s []string
				for _, a := range c {
					s = append(s, string(a))
				}
				got = append(got, s)
			}
		}
		want := [][]string{args, args}
		if inline {
			want = append(want, args)
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("read %q, want %q", got, want)
		}
	})
}

// validHash's shortcut for SHA-256 hashes says what segments.ValidateHash says.
func TestValidHashAgreesWithValidateHash(t *testing.T) {
	h := segments.Hash("alice")
	cases := []string{h, segments.Hash(""), h[:42] + "B=", h[:42] + "A=", h[:43] + "A", h[:10] + "-" + h[11:], h[:10] + "=" + h[11:],
		h + "=", h[:40], "", "QQ==", "QR=="}
	for i := range 64 {
		cases = append(cases, segments.Hash(strings.Repeat("x", i)))
	}
	for _, c := range cases {
		if got, want := validHash(c) == nil, segments.ValidateHash(c) == nil; got != want {
			t.Errorf("%q: valid %v, ValidateHash says %v", c, got, want)
		}
	}
}
