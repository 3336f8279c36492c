package resp

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bigseg/bigseg/segments"
)

// slowStore answers every read "no membership" after delay, counting the contexts read.
type slowStore struct {
	delay time.Duration
	read  atomic.Int64
}

func (s *slowStore) Memberships(ctx context.Context, hashes []string) []segments.Read {
	s.read.Add(int64(len(hashes)))
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
	}
	return make([]segments.Read, len(hashes))
}

func (s *slowStore) Metadata(context.Context) (segments.Metadata, error) {
	return segments.Metadata{LastSynchronized: time.Now()}, nil
}

// A client that pipelines far more commands than one read of its connection takes, each a
// miss of a slow store, and closes: its unread commands hide its close from a peek, but the
// first answer sent to it fails the next, and the rest of its pipeline is dropped (before,
// every command of the first read, about 50 here, was read from the store for nobody).
func TestGonePipelineIsDropped(t *testing.T) {
	st := &slowStore{delay: 20 * time.Millisecond}
	svc := oneService(st, segments.Config{LookupTimeout: time.Minute})
	svc.Poll(context.Background())
	s := New(Config{}, svc.Environments()[0])
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() {
		s.Close()
		<-done
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var pipeline []byte
	for i := range 500 { // 40 KB, ten times what the server reads at once
		pipeline = append(pipeline, "SMEMBERS launchdarkly:big_segment_include:"+segments.Hash("ctx-"+strconv.Itoa(i))+"\r\n"...)
	}
	if _, err := c.Write(pipeline); err != nil {
		t.Fatal(err)
	}
	c.Close()
	open := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns)
	}
	for deadline := time.Now().Add(30 * time.Second); open() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection of a client that closed is still served after 30 s")
		}
	}
	t.Logf("%d contexts read", st.read.Load())
	if n := st.read.Load(); n > 5 {
		t.Errorf("%d contexts read for a client that had closed, want a few at most", n)
	}
}
