package resp_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bigseg/bigseg/resp"
	"github.com/bigseg/bigseg/segments"
)

// heldStore is a store whose reads wait until release is closed (or their context ends),
// and which says what it was asked for.
type heldStore struct {
	release chan struct{}
	mu      sync.Mutex
	asked   []string
}

func (s *heldStore) Memberships(ctx context.Context, hashes []string) []segments.Read {
	s.mu.Lock()
	s.asked = append(s.asked, hashes...)
	s.mu.Unlock()
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return make([]segments.Read, len(hashes))
}

func (s *heldStore) Metadata(context.Context) (segments.Metadata, error) {
	return segments.Metadata{LastSynchronized: time.Now()}, nil
}

func (s *heldStore) read() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.asked)
}

// A client that hangs up while its SMEMBERS waits for a read slot gives the slot up: the
// context it asked for is never read, and its lookup ends at once, not at the lookup timeout
// (before, it waited a minute here, then read the store for nobody).
func TestGoneClientsMissIsNotRead(t *testing.T) {
	st := &heldStore{release: make(chan struct{})}
	svc := oneService(st, segments.Config{ReadsInFlight: 1, LookupTimeout: time.Minute})
	svc.Poll(context.Background())
	var answered atomic.Int64 // commands answered (or given up)
	addr := serve(t, svc, resp.Config{Observe: func(string, bool, time.Duration) { answered.Add(1) }})
	smembers := func(key string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		k := "launchdarkly:big_segment_include:" + segments.Hash(key)
		if _, err := c.Write([]byte("SMEMBERS " + k + "\r\n")); err != nil {
			t.Fatal(err)
		}
		return c
	}

	holder := smembers("holder") // takes the one read slot, held
	waitFor(t, "the holder's read", func() bool { return len(st.read()) == 1 })
	smembers("gone").Close() // waits for the slot, then its client hangs up
	waitFor(t, "the gone client's command to end", func() bool { return answered.Load() == 1 })

	close(st.release)
	b := make([]byte, 64)
	holder.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := holder.Read(b); err != nil || string(b[:n]) != "*0\r\n" {
		t.Fatalf("the holder's answer: %q, %v", b[:n], err)
	}
	if got, want := st.read(), []string{segments.Hash("holder")}; !slices.Equal(got, want) {
		t.Errorf("the store read %q, want only the holder's context %q", got, want)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
