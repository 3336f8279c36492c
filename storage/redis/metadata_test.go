package redis_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/redis"
)

// countingConn counts the bytes read from the server.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// countingClient is a client of the shared test server that counts the bytes it reads.
func countingClient(t *testing.T) (*goredis.Client, *atomic.Int64) {
	opts, err := goredis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	read := &atomic.Int64{}
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn = countingConn{conn, read}
		if opts.TLSConfig != nil {
			conn = tls.Client(conn, opts.TLSConfig)
		}
		return conn, nil
	}
	c := goredis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c, read
}

// A poll reads metadata every few seconds: a huge value under either key (written by mistake
// or by malice) must be refused without being read, and the error must name the key and its
// length, not its content.
func TestMetadataReadsBoundedValues(t *testing.T) {
	c, read := countingClient(t)
	store := redis.New(c, redistest.Prefix(t, c))
	ctx := context.Background()
	const synced = "1764430000000"
	tests := []struct {
		name, synced, cursor string
		invalid              string // what the error says, "" for none
	}{
		{"10 MB synchronized_on", strings.Repeat("1", 10<<20), "", store.SynchronizedOnKey() + " holds 10485760 bytes"},
		{"10 MB cursor", synced, strings.Repeat("c", 10<<20), store.CursorKey() + " holds 10485760 bytes"},
		{"2 KB cursor", synced, strings.Repeat("c", 2048), store.CursorKey() + " holds 2048 bytes"},
		{"cursor of segments.MaxCursorBytes+1", synced, strings.Repeat("c", segments.MaxCursorBytes+1), store.CursorKey() + " holds 1025 bytes"},
		{"cursor of segments.MaxCursorBytes", synced, strings.Repeat("c", segments.MaxCursorBytes), ""},
		{"synchronized_on of 33 bytes", strings.Repeat("0", 20) + synced, "v1", store.SynchronizedOnKey() + " holds 33 bytes"},
		{"synchronized_on of 32 bytes", strings.Repeat("0", 19) + synced, "v1", ""},
		{"synchronized_on at the end of year 9999", strconv.FormatInt(segments.MaxSynchronizedOnMillis, 10), "v1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Del(ctx, store.SynchronizedOnKey(), store.CursorKey())
			c.Set(ctx, store.SynchronizedOnKey(), tt.synced, 0)
			if tt.cursor != "" {
				c.Set(ctx, store.CursorKey(), tt.cursor, 0)
			}
			before := read.Load()
			md, err := store.Metadata(ctx)
			if n := read.Load() - before; n > 4096 {
				t.Errorf("Metadata read %d bytes from the server, want at most 4096", n)
			}
			if tt.invalid == "" {
				ms, _ := strconv.ParseInt(tt.synced, 10, 64)
				if err != nil || !md.LastSynchronized.Equal(time.UnixMilli(ms)) || md.Cursor != tt.cursor {
					t.Errorf("Metadata = %v, cursor of %d bytes, %v; want %v, %d bytes", md.LastSynchronized, len(md.Cursor), err, time.UnixMilli(ms), len(tt.cursor))
				}
				return
			}
			if !errors.Is(err, segments.ErrInvalidMetadata) || !strings.Contains(err.Error(), tt.invalid) {
				t.Errorf("err = %.200v; want ErrInvalidMetadata saying %q", err, tt.invalid)
			}
			if err != nil && (strings.Contains(err.Error(), "cccccccccc") || strings.Contains(err.Error(), "1111111111")) {
				t.Errorf("the error quotes the value: %.200v", err)
			}
		})
	}
}

// A missing synchronized_on means never synchronized, an empty one is invalid; a missing
// cursor means none, and a cursor of the wrong type is invalid.
func TestMetadataMissingEmptyWrongType(t *testing.T) {
	c := redistest.Client(t)
	store := redis.New(c, redistest.Prefix(t, c))
	ctx := context.Background()
	if md, err := store.Metadata(ctx); err != nil || !md.LastSynchronized.IsZero() || md.Cursor != "" {
		t.Errorf("no keys: %v, %q, %v; want never synchronized, no cursor", md.LastSynchronized, md.Cursor, err)
	}
	c.Set(ctx, store.SynchronizedOnKey(), "", 0)
	if _, err := store.Metadata(ctx); !errors.Is(err, segments.ErrInvalidMetadata) {
		t.Errorf("empty synchronized_on: %v; want ErrInvalidMetadata", err)
	}
	c.Set(ctx, store.SynchronizedOnKey(), "1764430000000", 0)
	c.SAdd(ctx, store.CursorKey(), "a set, not a string")
	if _, err := store.Metadata(ctx); !errors.Is(err, segments.ErrInvalidMetadata) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("a set as the cursor: %v; want ErrInvalidMetadata (WRONGTYPE)", err)
	}
}

// A poll is one round trip, whatever it reads.
func TestMetadataIsOneRoundTrip(t *testing.T) {
	opts, _ := goredis.ParseURL(redistest.URL(t))
	c := goredis.NewClient(opts)
	t.Cleanup(func() { c.Close() }) // after Prefix's cleanup, which deletes the keys with it
	hook := &roundTrips{}
	c.AddHook(hook)
	store := redis.New(c, redistest.Prefix(t, c))
	ctx := context.Background()
	c.Set(ctx, store.SynchronizedOnKey(), "1764430000000", 0)
	c.Set(ctx, store.CursorKey(), "v1", 0)
	// Dial and handshake first: the connection's set-up commands pass through hooks too.
	store.Metadata(ctx)
	before := hook.n.Load()
	if md, err := store.Metadata(ctx); err != nil || md.Cursor != "v1" {
		t.Fatalf("Metadata: %v, %v", md, err)
	}
	if got := hook.n.Load() - before; got != 1 {
		t.Errorf("Metadata took %d round trips, want 1", got)
	}
}

// TestMetadatasOfEnvironments reads the metadata of three environments of one Redis (three
// prefixes) in one round trip, each its own, one of them never synchronized; on a cluster, one
// pipeline, split by go-redis into one call to each node holding the keys.
func TestMetadatasOfEnvironments(t *testing.T) {
	c := redistest.Client(t)
	base := redistest.Prefix(t, c)
	ctx := context.Background()
	prefixes := []string{base + ":prod", base + ":staging", base + ":qa"}
	stores := redis.NewStores(c, prefixes...)
	for i, s := range stores[:2] {
		c.Set(ctx, s.SynchronizedOnKey(), strconv.Itoa(1764430000000+i), 0)
		c.Set(ctx, s.CursorKey(), "c"+strconv.Itoa(i), 0)
	}
	hook := &roundTrips{}
	c.AddHook(hook)
	redis.Metadatas(ctx, stores...) // dial and handshake first: set-up commands pass through hooks too
	before := hook.n.Load()
	reads := redis.Metadatas(ctx, stores...)
	if n := hook.n.Load() - before; n != 1 {
		t.Errorf("the metadata of three environments took %d round trips, want 1", n)
	}
	for i, r := range reads {
		switch {
		case r.Err != nil:
			t.Errorf("%s: %v", prefixes[i], r.Err)
		case i < 2 && (r.Metadata.LastSynchronized.UnixMilli() != int64(1764430000000+i) || r.Metadata.Cursor != "c"+strconv.Itoa(i)):
			t.Errorf("%s: %+v", prefixes[i], r.Metadata)
		case i == 2 && (!r.Metadata.LastSynchronized.IsZero() || r.Metadata.Cursor != ""):
			t.Errorf("%s, never synchronized: %+v", prefixes[i], r.Metadata)
		}
	}
	// One environment's bad value fails that environment only.
	c.Set(ctx, stores[1].SynchronizedOnKey(), "soon", 0)
	reads = redis.Metadatas(ctx, stores...)
	if reads[0].Err != nil || !errors.Is(reads[1].Err, segments.ErrInvalidMetadata) || reads[2].Err != nil {
		t.Errorf("with staging's synchronized_on invalid: %v, %v, %v", reads[0].Err, reads[1].Err, reads[2].Err)
	}
}
