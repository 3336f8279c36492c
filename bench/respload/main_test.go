package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bigseg/bigseg/resp"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
)

// The keys respload asks for are those bigseg serves: the same hash, the same layout.
func TestHashIsBigsegs(t *testing.T) {
	for _, k := range []string{"user-0", "user-999999", "zoë"} {
		if got, want := hashKey(k), segments.Hash(k); got != want {
			t.Errorf("hashKey(%q) = %q, want %q", k, got, want)
		}
	}
}

// Against the real listener: every lookup is answered, with no error reply, from both the
// uniform draws and a keys file.
func TestLookupsAgainstTheListener(t *testing.T) {
	f := &fixture.Fixture{}
	for _, k := range []string{"user-0", "user-1", "user-2"} {
		f.Contexts = append(f.Contexts, fixture.Context{Key: k, Hash: segments.Hash(k), Included: []string{"a.g1"}, Excluded: []string{"b.g1"}})
	}
	svc := oneService(memory.New(f, time.Now))
	svc.Poll(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := resp.New(resp.Config{}, svc.Environments()[0])
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Shutdown(context.Background())
		<-done
	}()
	keys := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(keys, []byte("0\n2\n1\n2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []config{
		{keys: 3},
		{zipf: keys, start: 3},
	} {
		c.addr, c.prefix, c.conns, c.duration, c.seed = ln.Addr().String(), "launchdarkly", 2, 200*time.Millisecond, 1
		s, err := run(c)
		if err != nil {
			t.Fatal(err)
		}
		if s.total == 0 || s.errorReplies != 0 || s.errors != 0 {
			t.Errorf("%+v: %+v, want lookups answered with no errors", c, s)
		}
	}
	c := config{addr: ln.Addr().String(), prefix: "another", conns: 1, duration: 100 * time.Millisecond, keys: 3}
	if s, err := run(c); err != nil || s.errorReplies != s.total {
		t.Errorf("another prefix: %+v, %v: want every lookup answered with an error", s, err)
	}
}

func TestReadReply(t *testing.T) {
	for _, c := range []struct {
		in      string
		isError bool
	}{
		{"*2\r\n$3\r\na.b\r\n$1\r\nc\r\n", false},
		{"*0\r\n", false},
		{"$-1\r\n", false},
		{"+OK\r\n", false},
		{"-ERR no\r\n", true},
	} {
		br := bufio.NewReader(strings.NewReader(c.in + "+NEXT\r\n"))
		isErr, err := readReply(br)
		if err != nil || isErr != c.isError {
			t.Errorf("%q: %v, %v", c.in, isErr, err)
		}
		if rest, _ := br.ReadString('\n'); rest != "+NEXT\r\n" {
			t.Errorf("%q: left %q, want the next reply", c.in, rest)
		}
	}
}
