package resp

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
)

// discard is a connection that takes every write at once.
type discard struct{ net.Conn }

func (discard) Write(b []byte) (int, error)      { return len(b), nil }
func (discard) SetWriteDeadline(time.Time) error { return nil }

// benchServer is a listener over one context, key, holding refs included refs (and one
// excluded), cached; with its connection, which writes to nothing.
func benchServer(b *testing.B, refs int) (*Server, *conn, [2][][]byte) {
	c := fixture.Context{Key: "key", Hash: segments.Hash("key"), Excluded: []string{"blocked.g1"}}
	for i := range refs {
		c.Included = append(c.Included, "segment-"+strconv.Itoa(i)+".g1")
	}
	svc := oneService(memory.New(&fixture.Fixture{Contexts: []fixture.Context{c}}, time.Now))
	svc.Poll(context.Background())
	s := New(Config{}, svc.Environments()[0])
	pair := [2][][]byte{
		{[]byte("SMEMBERS"), []byte("launchdarkly:big_segment_include:" + c.Hash)},
		{[]byte("SMEMBERS"), []byte("launchdarkly:big_segment_exclude:" + c.Hash)},
	}
	cn := &conn{nc: discard{}}
	cn.gone, cn.leave = context.WithCancel(context.Background())
	return s, cn, pair
}

// An SDK's pair of cached SMEMBERS, each answered and sent before the next (-P 1), or 16
// pairs pipelined and sent together (-P 16).
func BenchmarkSMEMBERSPair(b *testing.B) {
	for _, depth := range []int{1, 16} {
		b.Run("P"+strconv.Itoa(depth), func(b *testing.B) {
			s, c, pair := benchServer(b, 2)
			b.ReportAllocs()
			for b.Loop() {
				for range depth {
					s.dispatch(c, pair[0])
					if depth == 1 {
						s.flush(c)
					}
					s.dispatch(c, pair[1])
					s.flush(c)
				}
			}
		})
	}
}

// A large answer: a context of 100,000 refs.
func BenchmarkSMEMBERSLarge(b *testing.B) {
	s, c, pair := benchServer(b, 100_000)
	b.ReportAllocs()
	for b.Loop() {
		s.dispatch(c, pair[0])
		s.flush(c)
	}
}

// Each command of the table is named as its key, lower case, as dispatch looks it up.
func TestCommandsAreNamedByTheirKeys(t *testing.T) {
	for key, cmd := range commands {
		if cmd.name != key || strings.ToLower(key) != key {
			t.Errorf("commands[%q] is named %q", key, cmd.name)
		}
	}
}
