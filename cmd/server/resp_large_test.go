package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
)

// The large answers' test: a context of respLargeRefs refs (an answer of 3 MiB), asked for by
// respLargeReaders clients that read almost none of it.
const (
	respLargeRefs    = 100_000
	respLargeReaders = 200
)

// TestRESPLargeAnswersUnread runs the real program as a process and has respLargeReaders
// clients each ask twice at once for a context's include set of respLargeRefs refs (6 MiB of
// answers, more than the kernel takes into a connection's socket buffers), and read only the
// first line: the listener sends an answer in pieces as it makes it from the cached
// membership, so each connection holds a buffer of fixed size, not a copy of the answer
// (before, each answer was made whole in its connection's buffer: RSS grew by 1,065 MiB).
// Meanwhile another client is answered, the large set too; once the write timeout has passed,
// the connections that do not read are closed, and their goroutines gone.
func TestRESPLargeAnswersUnread(t *testing.T) { // not parallel: it judges how a good client fares under attack
	if testing.Short() {
		t.Skip("a load test: not in -short runs")
	}
	refs := make([]any, respLargeRefs)
	for i := range refs {
		refs[i] = fmt.Sprintf("segment-number-%06d.g1", i)
	}
	readers := respLargeReaders
	if raceEnabled {
		// The readers' number sets the memory bound, which is not checked under the race
		// detector; there, making 200 readers' answers took 5 s of the test's 12 (CI runs the
		// 200 without -race too).
		readers /= 4
	}
	largeAnswersUnread(t, refs, readers)
}

// TestRESPHugeRefUnread is TestRESPLargeAnswersUnread with one ref of 8 MiB: a ref is sent in
// pieces too, never copied whole into a connection's buffer (before, each reader held one or
// two copies of it: 24-32 MiB a connection).
func TestRESPHugeRefUnread(t *testing.T) { // not parallel: it judges how a good client fares under attack
	if testing.Short() {
		t.Skip("a load test: not in -short runs")
	}
	largeAnswersUnread(t, []any{strings.Repeat("huge-", 8<<20/5), "small.g1"}, 40)
}

// largeAnswersUnread stores a context with refs, and has readers clients each ask twice at once
// for its include set (more than the kernel takes into a connection's socket buffers) and read
// only the first line; see TestRESPLargeAnswersUnread.
func largeAnswersUnread(t *testing.T, refs []any, readers int) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	ctx := context.Background()
	keys := respKeys{prefix}
	seedRedis(t, c, prefix, map[string][2][]string{"alice": {{"beta.g1"}}}, time.Now())
	large := keys.include("large")
	for i := 0; i < len(refs); i += 10_000 {
		if err := c.SAdd(ctx, large, refs[i:min(i+10_000, len(refs))]...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	answerBytes := 0
	for _, r := range refs {
		answerBytes += len(r.(string)) + 16
	}
	p := startProcess(t, withRESP(map[string]string{"BIGSEG_REDIS_URL": withParams(redistest.URL(t), "read_timeout=10s"), "BIGSEG_PREFIX": prefix,
		"BIGSEG_LOG_LEVEL": "info", "BIGSEG_CACHE_TTL": "1h", "BIGSEG_LOOKUP_TIMEOUT": "10s"}))
	addr := respAddr(t, p.logs)
	scraper := newGoodClient(p.URL)
	good := respClient(t, addr, goredis.Options{ReadTimeout: 10 * time.Second})
	respPolled(t, goRedisReads(good), keys)
	if m, err := good.SMembers(ctx, large).Result(); err != nil || len(m) != len(refs) { // and cached
		t.Fatalf("the large set: %d refs, %v", len(m), err)
	}
	open := func() float64 { return metricValue(t, scraper, p.URL, "bigseg_resp_open_connections") }
	goroutines := func() float64 { return metricValue(t, scraper, p.URL, "go_goroutines") }
	before, openBefore, goroutinesBefore := p.holdings(t), open(), goroutines()

	// The readers connect, then each asks twice at once, more than the kernel takes of a
	// connection's answers (tcp_wmem's 4 MiB at most, by default), waits for the first line,
	// and reads no more.
	cmd := []byte(strings.Repeat(encode("SMEMBERS", large), 2))
	want := "*" + strconv.Itoa(len(refs)) + "\r\n"
	conns := make([]net.Conn, readers)
	for i := range conns {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		conns[i] = conn
	}
	peak := before
	sample := func() { peak.rssBytes = max(peak.rssBytes, p.holdings(t).rssBytes) }
	for _, conn := range conns {
		if _, err := conn.Write(cmd); err != nil {
			t.Fatal(err)
		}
	}
	for i, conn := range conns {
		if line, err := bufio.NewReaderSize(conn, 16).ReadString('\n'); err != nil || line != want {
			t.Fatalf("reader %d: %q, %v, want %q", i, line, err, want)
		}
		sample()
	}
	// Another client is answered meanwhile, the large set too.
	if m, err := good.SMembers(ctx, keys.include("alice")).Result(); err != nil || len(m) != 1 {
		t.Errorf("alice's include set while the readers hold their answers: %q, %v", m, err)
	}
	if m, err := good.SMembers(ctx, large).Result(); err != nil || len(m) != len(refs) {
		t.Errorf("the large set while the readers hold theirs: %d refs, %v", len(m), err)
	}
	waitFor(t, "the readers' connections closed at the write timeout, their goroutines gone", func() bool {
		sample()
		return open() <= openBefore && goroutines() <= goroutinesBefore+5
	})
	// What a connection may hold whatever its answers' size, and a margin for the runtime and
	// the good client's answers.
	// ... and the collector's headroom over a live heap that holds the answer's membership
	// (GOGC lets garbage grow to the live heap's size before a collection).
	bound := readers*respConnBytes + 16<<20 + 2*answerBytes
	t.Logf("%d readers of an answer of %d refs (%.1f MiB) each, twice: RSS from %d MiB to %d MiB at the peak, +%d MiB (bound +%d MiB)",
		readers, len(refs), float64(answerBytes)/(1<<20),
		before.rssBytes>>20, peak.rssBytes>>20, (peak.rssBytes-before.rssBytes)>>20, bound>>20)
	switch {
	case raceEnabled:
		t.Log("RSS not checked: the race detector multiplies it (CI runs this test without -race too)")
	case peak.rssBytes-before.rssBytes > bound:
		t.Errorf("RSS grew by %d MiB with %d readers not reading, over the bound of %d MiB", (peak.rssBytes-before.rssBytes)>>20, readers, bound>>20)
	}
}
