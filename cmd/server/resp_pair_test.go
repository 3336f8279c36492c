package main

import (
	"bytes"
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
)

// slowProxy forwards connections to a Redis at target, each byte delay after it arrived, both
// ways: a Redis 2 x delay away. It counts the commands it forwards that hold word.
type slowProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	word   []byte
	seen   atomic.Int64
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newSlowProxy(t *testing.T, target string, delay time.Duration, word string) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, target: target, delay: delay, word: []byte(word)}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *slowProxy) URL() string { return "redis://" + p.ln.Addr().String() }

func (p *slowProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(server, client, true) })
		p.wg.Go(func() { p.forward(client, server, false) })
	}
}

// forward copies what src sends to dst, each piece delay after it arrived, then closes dst.
func (p *slowProxy) forward(dst, src net.Conn, count bool) {
	type piece struct {
		due  time.Time
		data []byte
	}
	pieces := make(chan piece, 1024)
	p.wg.Go(func() {
		defer dst.Close()
		for pc := range pieces {
			time.Sleep(time.Until(pc.due)) // the fault: a Redis delay away
			if _, err := dst.Write(pc.data); err != nil {
				for range pieces { // let the reader end
				}
				return
			}
		}
	})
	defer close(pieces)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if count {
				p.seen.Add(int64(bytes.Count(buf[:n], p.word)))
			}
			pieces <- piece{time.Now().Add(p.delay), slices.Clone(buf[:n])}
		}
		if err != nil {
			return
		}
	}
}

// TestRESPPairFromOneSlowRead: with Redis 0.55 s away each way (a lookup of 1.1 s, over a
// second) and the cache off, an SDK's SMEMBERS of a context's include set and then of its
// exclude set, with a Relay patch applied between the two (both sets and the cursor changed),
// are answered from one store read: both sets as they were before the patch. Before, the
// exclude set was read again once the include's read had taken over a second, and answered
// as after the patch: a pair of two versions, and twice the lookup's time.
func TestRESPPairFromOneSlowRead(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	ctx := context.Background()
	keys := respKeys{prefix}
	seedRedis(t, c, prefix, map[string][2][]string{"alice": {{"v1-in.g1"}, {"v1-out.g1"}}}, time.Now())
	c.Set(ctx, cursorKey(prefix), "v1", 0)
	const delay = 550 * time.Millisecond
	proxy := newSlowProxy(t, c.Options().Addr, delay, keys.include("alice"))
	srv := start(t, withRESP(map[string]string{"BIGSEG_REDIS_URL": proxy.URL() + "?read_timeout=20s&dial_timeout=20s", "BIGSEG_PREFIX": prefix,
		"BIGSEG_CACHE_SIZE": "0", "BIGSEG_LOOKUP_TIMEOUT": "20s", "BIGSEG_WRITE_TIMEOUT": "1m", "BIGSEG_STATUS_POLL_INTERVAL": "1h"}))
	rc := respClient(t, respAddr(t, srv.logs), goredis.Options{PoolSize: 1, ReadTimeout: 30 * time.Second})
	r := goRedisReads(rc)
	respPolled(t, r, keys)
	if _, err := r.smembers(keys.include("alice")); err != nil { // bigseg's Redis connections dialled
		t.Fatal(err)
	}

	readsBefore := proxy.seen.Load()
	start := time.Now()
	inc, err := r.smembers(keys.include("alice"))
	if err != nil {
		t.Fatal(err)
	}
	// The patch, once the include set is answered and before its exclude set is asked for.
	h := segments.Hash("alice")
	if _, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, cursorKey(prefix), "v2", 0)
		p.Del(ctx, prefix+":big_segment_include:"+h, prefix+":big_segment_exclude:"+h)
		p.SAdd(ctx, prefix+":big_segment_include:"+h, "v2-in.g1")
		p.SAdd(ctx, prefix+":big_segment_exclude:"+h, "v2-out.g1")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	exc, err := r.smembers(keys.exclude("alice"))
	if err != nil {
		t.Fatal(err)
	}
	took, reads := time.Since(start), proxy.seen.Load()-readsBefore
	t.Logf("the pair: include %q, exclude %q, %d store reads, in %v (Redis %v away each way)", inc, exc, reads, took.Round(time.Millisecond), delay)
	if !slices.Equal(inc, []string{"v1-in.g1"}) || !slices.Equal(exc, []string{"v1-out.g1"}) {
		t.Errorf("the pair: include %q, exclude %q; want both from the read before the patch, [v1-in.g1] [v1-out.g1]", inc, exc)
	}
	if reads != 1 {
		t.Errorf("the pair took %d store reads, want 1", reads)
	}
}
