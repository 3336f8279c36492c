package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/resp"
)

// The settings of the Redis-protocol hostile-client test: small, so that the bounds they imply
// are tight.
const (
	respHostileMaxConns    = 50
	respHostileReadTimeout = time.Second
	respHostileToken       = "resp-hostile-t0ken"
	respHostileFlood       = 1500 // connections at once, 30 times the limit
)

// What the listener's defences are made of, as resp and limit have them (unexported there).
const (
	respCommandBytes = 16 << 10               // resp's maxCommandBytes: a connection's command buffer
	respFlushBytes   = 32 << 10               // resp's flushBytes: answers kept before they are sent
	respSilentGrace  = 100 * time.Millisecond // limit's silentGrace: a silent connection's time before it may be closed at the limit
)

// respGoodBound is the longest a well-behaved client's lookup (three reads, from the cache)
// may take under attack: well within go-redis's read timeout (3 s), past which an SDK reports
// the store unavailable.
const respGoodBound = 2 * time.Second

// respHugeRefs are the refs of the context whose answer is the largest.
var respHugeRefs = func() []string {
	refs := make([]string, hostileBigRefs)
	for i := range refs {
		refs[i] = fmt.Sprintf("segment-number-%05d.g1", i)
	}
	return refs
}()

// respConnBytes bounds what one connection can make the process hold, whatever the size of its
// answers: its command buffer, its answers kept (a buffer that grows to twice flushBytes
// before it is let go; a large answer is sent in pieces of flushBytes as it is made), and its
// goroutine's stack.
const respConnBytes = respCommandBytes + 2*respFlushBytes + 16<<10

// respGood is a well-behaved client: an SDK's reads, over and over, through go-redis with
// its defaults (a pool, retries on a broken connection), with the token.
type respGood struct {
	rc      *goredis.Client
	keys    respKeys
	synced  string
	ok      atomic.Int64
	failed  atomic.Int64
	failure atomic.Value
	slowest atomic.Int64 // nanoseconds of the slowest lookup
}

// lookup reads synchronized_on and alice's two sets, and checks them.
func (g *respGood) lookup(ctx context.Context) {
	start := time.Now()
	err := func() error {
		if v, err := g.rc.Get(ctx, g.keys.synchronizedOn()).Result(); err != nil || v != g.synced {
			return fmt.Errorf("GET synchronized_on: %q, %v", v, err)
		}
		if m, err := g.rc.SMembers(ctx, g.keys.include("alice")).Result(); err != nil || !slices.Equal(m, []string{"beta.g1"}) {
			return fmt.Errorf("alice's include set: %q, %v", m, err)
		}
		if m, err := g.rc.SMembers(ctx, g.keys.exclude("alice")).Result(); err != nil || len(m) != 0 {
			return fmt.Errorf("alice's exclude set: %q, %v", m, err)
		}
		return nil
	}()
	if ctx.Err() != nil {
		return // the loop ended mid-lookup: no answer to judge
	}
	if err != nil {
		g.failed.Add(1)
		g.failure.Store(err.Error())
		return
	}
	g.ok.Add(1)
	for d := int64(time.Since(start)); ; {
		if old := g.slowest.Load(); d <= old || g.slowest.CompareAndSwap(old, d) {
			break
		}
	}
}

// respAttack is what a phase's attackers saw: each attempt ends as the defence says it must
// (expected) or not (unexpected, with an example).
type respAttack struct {
	attempts, expected, unexpected atomic.Int64
	example                        atomic.Value
	longest                        atomic.Int64 // nanoseconds: the longest an attempt took to end
}

func (a *respAttack) saw(ok bool, what string, took time.Duration) {
	a.attempts.Add(1)
	if ok {
		a.expected.Add(1)
	} else {
		a.unexpected.Add(1)
		a.example.Store(what)
	}
	for d := int64(took); ; {
		if old := a.longest.Load(); d <= old || a.longest.CompareAndSwap(old, d) {
			return
		}
	}
}

// encode is a command as clients send it.
func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// redisKeys is every key of a Redis of the test's own and its value.
func redisKeys(t *testing.T, c *goredis.Client) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		switch typ := c.Type(ctx, k).Val(); typ {
		case "string":
			out[k] = c.Get(ctx, k).Val()
		case "set":
			m := c.SMembers(ctx, k).Val()
			slices.Sort(m)
			out[k] = m
		default:
			out[k] = typ
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// redisReads are the commands that read Redis: bigseg's own (its lookups and polls, its
// client's handshake) and the test's (redisKeys, commandCalls). A write is none of them.
var redisReads = map[string]bool{"smembers": true, "exists": true, "strlen": true, "getrange": true, "get": true, "mget": true,
	"scan": true, "type": true, "info": true, "ping": true, "hello": true, "client|setinfo": true, "client|setname": true,
	"auth": true, "select": true}

// TestRESPHostileClients runs the real program as a process, over a Redis of its own, and
// attacks its Redis-protocol listener one way after another: writes and made-up commands, a
// flood of connections far beyond the limit, long pipelines streamed, declared 1 GB bulk
// strings, pipelines whose answers are never read, commands sent a byte at a time, and token
// guessing. Throughout, a
// well-behaved client keeps reading and no read of it may fail; during each attack what the
// process holds stays within bounds that follow from the settings, the attackers are cut off
// as the defences say, and after it the goroutines and file descriptors are back near their
// baseline.
func TestRESPHostileClients(t *testing.T) { // not parallel: it judges how a good client fares under attack
	if testing.Short() {
		t.Skip("a load test: not in -short runs")
	}
	rs := redistest.Start(t)
	c := rs.Client()
	synced := time.Now()
	seedRedis(t, c, "launchdarkly", map[string][2][]string{"alice": {{"beta.g1"}}, "bob": {nil, {"beta.g1"}},
		"huge": {respHugeRefs}}, synced)
	p := startProcess(t, withRESP(map[string]string{"BIGSEG_REDIS_URL": rs.URL(), "BIGSEG_LOG_LEVEL": "info",
		"BIGSEG_API_TOKENS":        respHostileToken,
		"BIGSEG_MAX_CONNS":         strconv.Itoa(respHostileMaxConns),       // the Redis-protocol listener's too
		"BIGSEG_BODY_READ_TIMEOUT": (respHostileReadTimeout / 2).String()})) // a command gets twice that
	addr := respAddr(t, p.logs)
	keys := respKeys{"launchdarkly"}
	scraper := newGoodClient(p.URL)
	var goodDials atomic.Int64 // the connections the well-behaved client had to make
	good := &respGood{keys: keys, synced: strconv.FormatInt(synced.UnixMilli(), 10)}
	good.rc = respClient(t, addr, goredis.Options{Password: respHostileToken, MaxRetries: 3,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			goodDials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}})
	waitFor(t, "the first status poll", func() bool { return good.rc.Get(context.Background(), keys.synchronizedOn()).Err() == nil })
	good.lookup(context.Background())
	if good.failed.Load() > 0 {
		t.Fatalf("before any attack: %v", good.failure.Load())
	}
	// The good client looks up throughout, attacks and pauses between them alike.
	lookups, stopLookups := context.WithCancel(context.Background())
	var looking sync.WaitGroup
	looking.Go(func() {
		for lookups.Err() == nil {
			good.lookup(lookups)
		}
	})
	t.Cleanup(func() { stopLookups(); looking.Wait() })

	goroutines := func() float64 { return metricValue(t, scraper, p.URL, "go_goroutines") }
	before, goroutinesBefore := p.holdings(t), goroutines()
	// Bounds: per connection a goroutine, a file descriptor and respConnBytes, and while its
	// lookup waits at most one goroutine more (the look at whether its client has gone); a
	// margin for the runtime, the poller and the scrapes.
	maxGoroutines := goroutinesBefore + 2*respHostileMaxConns + 30
	maxFDs := before.fds + respHostileMaxConns + 10
	// RSS is bounded from what the process holds as each attack begins: the runtime gives
	// memory back to the system lazily.
	maxRSSGrowth := respHostileMaxConns*respConnBytes + 64<<20
	t.Logf("baseline: %v, %v goroutines; bounds: %d goroutines, %d fds, RSS %d MiB over that at an attack's start (%d KiB a connection)",
		before, goroutinesBefore, int(maxGoroutines), maxFDs, maxRSSGrowth>>20, respConnBytes>>10)

	var keysBefore map[string]any
	var callsBefore map[string]int
	var guesses sync.Map // the tokens the guessing attackers tried
	flood := newRESPFlood(addr)
	phases := []struct {
		name      string
		attackers int
		within    time.Duration // the attack's run; attackers that loop stop at its end
		attack    func(ctx context.Context, a *respAttack)
		before    func(t *testing.T)                // before the attack
		during    func(t *testing.T)                // alongside it
		after     func(t *testing.T, a *respAttack) // once every attacker has ended
	}{
		{name: "writes and made-up commands", attackers: 10, within: 1500 * time.Millisecond, attack: respWrites(addr),
			before: func(t *testing.T) { keysBefore, callsBefore = redisKeys(t, c), commandCalls(t, c) },
			after: func(t *testing.T, a *respAttack) {
				if diff := cmp.Diff(keysBefore, redisKeys(t, c)); diff != "" {
					t.Errorf("Redis's keys changed (-before +after):\n%s", diff)
				}
				for name, n := range commandCalls(t, c) {
					if n != callsBefore[name] && !redisReads[name] {
						t.Errorf("Redis ran %s %d times during the attack", name, n-callsBefore[name])
					}
				}
			}},
		{name: fmt.Sprintf("%d connections at once", respHostileFlood), attackers: respHostileFlood, within: 30 * time.Second,
			attack: flood.attack, during: func(t *testing.T) {
				// A new client comes once the flood has connected, and queues behind it: the
				// listener frees a slot at least every silent connection's grace (and its
				// recheck, half of it), by closing the connection silent longest.
				for deadline := time.Now().Add(15 * time.Second); flood.dialed.Load() < respHostileFlood; {
					if time.Now().After(deadline) {
						t.Errorf("%d of the flood's %d connections made in 15s", flood.dialed.Load(), respHostileFlood)
						return
					}
					time.Sleep(10 * time.Millisecond) // polling a condition (not waitFor: this is not the test's goroutine)
				}
				bound := time.Duration(respHostileFlood/respHostileMaxConns+1)*(respSilentGrace*3/2) + 5*time.Second
				fresh := respClient(t, addr, goredis.Options{Password: respHostileToken, DialTimeout: 2 * bound, ReadTimeout: 2 * bound})
				start := time.Now()
				if err := fresh.Get(context.Background(), keys.synchronizedOn()).Err(); err != nil {
					t.Errorf("a new client during the flood: %v", err)
				}
				if took := time.Since(start); took > bound {
					t.Errorf("a new client during the flood was answered in %v, over %v", took, bound)
				} else {
					t.Logf("a new client during the flood was answered in %v (bound %v)", took.Round(time.Millisecond), bound)
				}
			}},
		{name: "long pipelines streamed, their answers read", attackers: 10, within: 2 * time.Second, attack: respStreamed(addr)},
		{name: "declared 1 GB bulk strings, then their data", attackers: 50, within: 2 * time.Second, attack: respHugeBulk(addr)},
		{name: "pipelines whose answers are never read", attackers: 20, within: 2 * (resp.DefaultWriteTimeout + 15*time.Second), attack: respUnread(addr),
			after: func(t *testing.T, a *respAttack) {
				slack := 5 * time.Second
				if raceEnabled { // the race detector slows the server's writes and the attackers' alike
					slack = 15 * time.Second
				}
				if bound := resp.DefaultWriteTimeout + slack; time.Duration(a.longest.Load()) > bound {
					t.Errorf("a pipeline never read was cut after %v, over the write timeout and slack, %v", time.Duration(a.longest.Load()), bound)
				}
			}},
		{name: "commands a byte at a time", attackers: 20, within: 10 * time.Second, attack: respByteAtATime(addr),
			after: func(t *testing.T, a *respAttack) {
				if bound := respHostileReadTimeout + 2*time.Second; time.Duration(a.longest.Load()) > bound {
					t.Errorf("a command sent a byte at a time was cut %v after its first byte, over the read timeout and slack, %v", time.Duration(a.longest.Load()), bound)
				}
			}},
		{name: "token guessing", attackers: 20, within: time.Second, attack: respGuesses(addr, &guesses),
			after: func(t *testing.T, a *respAttack) {
				logs := p.logs.all()
				if strings.Contains(logs, respHostileToken) {
					t.Error("the token is in the logs")
				}
				guesses.Range(func(g, _ any) bool {
					if strings.Contains(logs, g.(string)) {
						t.Errorf("a guessed token, %q, is in the logs", g)
						return false
					}
					return true
				})
			}},
	}
	for _, ph := range phases {
		t.Run(ph.name, func(t *testing.T) {
			if ph.before != nil {
				ph.before(t)
			}
			maxRSS := p.holdings(t).rssBytes + maxRSSGrowth
			failedBefore := good.failed.Load()
			okBefore := good.ok.Load()
			good.slowest.Store(0)
			dialsBefore := goodDials.Load()
			ctx, cancel := context.WithTimeout(context.Background(), ph.within)
			defer cancel()
			var a respAttack
			var attackers sync.WaitGroup
			for range ph.attackers {
				attackers.Go(func() { ph.attack(ctx, &a) })
			}
			var alongside sync.WaitGroup
			if ph.during != nil {
				alongside.Go(func() { ph.during(t) })
			}
			done := make(chan struct{})
			go func() { attackers.Wait(); alongside.Wait(); close(done) }()
			peak, peakGoroutines, peakOpen := respPeaks(t, p, scraper, done)
			if ph.after != nil {
				ph.after(t, &a)
			}
			waitFor(t, "goroutines and fds back near their baseline", func() bool {
				return goroutines() <= goroutinesBefore+10 && p.holdings(t).fds <= before.fds+5
			})
			after := p.holdings(t)
			t.Logf("peak: %v, %v goroutines, %v connections open; after: %v, %v goroutines; attackers: %d attempts, %d cut off as they must be, longest %v; the good client: %d lookups, slowest %v, %d new connections",
				peak, peakGoroutines, peakOpen, after, goroutines(), a.attempts.Load(), a.expected.Load(),
				time.Duration(a.longest.Load()).Round(time.Millisecond), good.ok.Load()-okBefore, time.Duration(good.slowest.Load()).Round(time.Millisecond), goodDials.Load()-dialsBefore)
			if n := good.failed.Load() - failedBefore; n > 0 {
				t.Errorf("the well-behaved client: %d lookups failed, e.g. %v", n, good.failure.Load())
			}
			if good.ok.Load() == okBefore {
				t.Error("the well-behaved client was answered nothing during the attack")
			}
			if slowest := time.Duration(good.slowest.Load()); slowest > respGoodBound {
				t.Errorf("the well-behaved client's slowest lookup took %v, over %v", slowest, respGoodBound)
			}
			if a.attempts.Load() == 0 || a.unexpected.Load() > 0 {
				t.Errorf("attackers: %d of %d attempts not cut off as they must be, e.g. %v", a.unexpected.Load(), a.attempts.Load(), a.example.Load())
			}
			if peakGoroutines > maxGoroutines {
				t.Errorf("%v goroutines at the peak, over the bound of %v", peakGoroutines, maxGoroutines)
			}
			if peak.fds > maxFDs {
				t.Errorf("%d fds at the peak, over the bound of %d", peak.fds, maxFDs)
			}
			if peakOpen > respHostileMaxConns {
				t.Errorf("%v connections open at the peak, over BIGSEG_MAX_CONNS=%d", peakOpen, respHostileMaxConns)
			}
			switch {
			case raceEnabled:
				t.Log("RSS not checked: the race detector multiplies it (CI runs this test without -race too)")
			case peak.rssBytes > maxRSS:
				t.Errorf("RSS %d MiB at the peak, over the bound of %d MiB", peak.rssBytes>>20, maxRSS>>20)
			}
		})
	}
	f := scrapeFamilies(t, scraper, p.URL)["bigseg_resp_commands_total"]
	if want := 2 * (len(resp.Commands()) + 1); len(f.Metric) != want {
		t.Errorf("%d series of bigseg_resp_commands_total after the attacks, want %d (a command and result each)", len(f.Metric), want)
	}
}

// respPeaks samples what p holds (through scraper for the goroutines and the listener's open
// connections) until done is closed, and returns the peaks.
func respPeaks(t *testing.T, p *process, scraper *goodClient, done <-chan struct{}) (peak holdings, goroutines, open float64) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond) // a sampling period
	defer tick.Stop()
	for {
		h := p.holdings(t)
		peak.rssBytes, peak.threads, peak.fds = max(peak.rssBytes, h.rssBytes), max(peak.threads, h.threads), max(peak.fds, h.fds)
		families := scrapeFamilies(t, scraper, p.URL)
		goroutines = max(goroutines, (&dto{families["go_goroutines"]}).value())
		open = max(open, (&dto{families["bigseg_resp_open_connections"]}).value())
		select {
		case <-done:
			return peak, goroutines, open
		case <-tick.C:
		}
	}
}

// respWrites sends, over and over on new connections, every write and administrative command
// a hostile client might try, and made-up ones: each must be an error, and the connection
// must stay open.
func respWrites(addr string) func(ctx context.Context, a *respAttack) {
	keys := respKeys{"launchdarkly"}
	writes := [][]string{
		{"SET", keys.synchronizedOn(), "0"}, {"SET", "evil", "1"}, {"DEL", keys.include("alice")}, {"SADD", keys.include("bob"), "evil.g1"},
		{"SREM", keys.include("alice"), "beta.g1"}, {"FLUSHALL"}, {"FLUSHDB", "ASYNC"}, {"EVAL", "return redis.call('FLUSHALL')", "0"},
		{"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"}, {"FCALL", "f", "0"}, {"SCRIPT", "FLUSH"},
		{"CONFIG", "SET", "maxmemory", "1"}, {"CONFIG", "REWRITE"}, {"DEBUG", "SLEEP", "1"}, {"DEBUG", "SEGFAULT"},
		{"SHUTDOWN", "NOSAVE"}, {"MULTI"}, {"EXEC"}, {"SWAPDB", "0", "1"}, {"MIGRATE", "127.0.0.1", "1", "k", "0", "1"},
		{"BGSAVE"}, {"REPLICAOF", "127.0.0.1", "1"}, {"CLIENT", "KILL", "TYPE", "normal"}, {"SELECT", "1"}, {"MODULE", "LOAD", "/x.so"},
	}
	return func(ctx context.Context, a *respAttack) {
		for ctx.Err() == nil {
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				continue
			}
			start := time.Now()
			cmds := slices.Clone(writes)
			for range 20 {
				cmds = append(cmds, []string{"X" + strconv.FormatUint(rand.Uint64(), 36) + strings.Repeat("W", rand.IntN(4000)), "arg"})
			}
			var b strings.Builder
			for _, c := range cmds {
				b.WriteString(encode(c...))
			}
			go io.WriteString(conn, b.String())
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			ok, what := true, ""
			for _, c := range cmds {
				line, err := br.ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "-") {
					ok, what = false, fmt.Sprintf("%.40q: %q, %v", c, line, err)
					break
				}
			}
			if ok { // still open
				io.WriteString(conn, "PING\r\n")
				if line, err := br.ReadString('\n'); err != nil || line != "+PONG\r\n" {
					ok, what = false, fmt.Sprintf("PING after the writes: %q, %v", line, err)
				}
			}
			conn.Close()
			a.saw(ok, what, time.Since(start))
		}
	}
}

// respFlood opens a connection that sends nothing, or the beginning of a command, and holds
// it until the listener closes it; its attackers all at once, a multiple of the limit.
type respFlood struct {
	addr   string
	dialed atomic.Int64
}

func newRESPFlood(addr string) *respFlood { return &respFlood{addr: addr} }

func (f *respFlood) attack(ctx context.Context, a *respAttack) {
	start := time.Now()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", f.addr)
	if err != nil {
		a.saw(false, "dial: "+err.Error(), time.Since(start))
		return
	}
	defer conn.Close()
	switch f.dialed.Add(1) % 3 {
	case 1:
		io.WriteString(conn, "*2\r\n$3\r\nGET\r\n$40\r\nlaunchdarkly:big_segm")
	case 2:
		io.WriteString(conn, "SMEMBERS launchdarkly:big_segment_include:")
	}
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	got, err := io.ReadAll(conn)
	a.saw(ctx.Err() == nil && len(got) == 0, fmt.Sprintf("%q, %v", got, err), time.Since(start))
}

// respStreamed streams a pipeline of long commands (12 KiB, just under the bound) as fast as
// the listener takes them, in writes that each end inside a command, and reads every answer:
// the listener holds a command's buffer for it, not what it has sent (with redcon's reader a
// connection held hundreds of MB).
func respStreamed(addr string) func(ctx context.Context, a *respAttack) {
	batch := []byte(strings.Repeat(encode("FOO", strings.Repeat("x", 12<<10)), 16))
	return func(ctx context.Context, a *respAttack) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			a.saw(false, "dial: "+err.Error(), 0)
			return
		}
		defer conn.Close()
		start := time.Now()
		var answers atomic.Int64
		bad := make(chan string, 1)
		go func() {
			br := bufio.NewReader(conn)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if !strings.HasPrefix(line, "-ERR unknown command 'foo'") {
					bad <- line
					return
				}
				answers.Add(1)
			}
		}()
		stop := context.AfterFunc(ctx, func() { conn.SetWriteDeadline(time.Now()) })
		defer stop()
		for {
			if _, err := conn.Write(batch[:len(batch)-5]); err != nil {
				break
			}
			if _, err := conn.Write(batch[len(batch)-5:]); err != nil {
				break
			}
		}
		select {
		case line := <-bad:
			a.saw(false, "answer "+line, time.Since(start))
		default:
			a.saw(ctx.Err() != nil && answers.Load() > 0, fmt.Sprintf("%d answers, cut off: %v", answers.Load(), ctx.Err() == nil), time.Since(start))
		}
	}
}

// respHugeBulk declares a bulk string of 1 GB and then sends its data, a byte every 100 ms or
// as fast as the listener takes it, or sends an inline command that never ends: refused with
// an error and the connection closed, at once for the declared one, after the command
// buffer's worth for the other; over and over until the attack ends.
func respHugeBulk(addr string) func(ctx context.Context, a *respAttack) {
	fast := []byte(strings.Repeat("x", 4<<10))
	var n atomic.Int64
	return func(ctx context.Context, a *respAttack) {
		for ctx.Err() == nil {
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				continue
			}
			start := time.Now()
			head, data, pause := "*2\r\n$3\r\nGET\r\n$1000000000\r\n", fast, time.Duration(0)
			switch n.Add(1) % 3 {
			case 1:
				data, pause = []byte("x"), 100*time.Millisecond
			case 2:
				head = "GET "
			}
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				if _, err := io.WriteString(conn, head); err != nil {
					return
				}
				for {
					if _, err := conn.Write(data); err != nil {
						return
					}
					if pause > 0 {
						time.Sleep(pause) // the attack's pace
					}
				}
			}()
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(conn)
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			a.saw(!timedOut && strings.HasPrefix(string(got), "-ERR command too long"), fmt.Sprintf("%q, %v", got, err), time.Since(start))
			conn.Close()
			<-sent
		}
	}
}

// respUnread authenticates, then pipelines the largest answer's command without reading a
// byte, with a small receive buffer, until the listener cuts it off: once its writes are
// stuck past the write timeout.
func respUnread(addr string) func(ctx context.Context, a *respAttack) {
	keys := respKeys{"launchdarkly"}
	batch := []byte(strings.Repeat(encode("SMEMBERS", keys.include("huge")), 500))
	return func(ctx context.Context, a *respAttack) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			a.saw(false, "dial: "+err.Error(), 0)
			return
		}
		defer conn.Close()
		_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
		stop := context.AfterFunc(ctx, func() { conn.SetWriteDeadline(time.Now()) })
		defer stop()
		start := time.Now()
		_, err = io.WriteString(conn, encode("AUTH", respHostileToken))
		for err == nil {
			_, err = conn.Write(batch)
		}
		a.saw(ctx.Err() == nil, fmt.Sprintf("still writing when the attack ended: %v", err), time.Since(start))
	}
}

// respByteAtATime sends a PING a byte every 250 ms, which would take 3.5 s: it must be cut
// off, unanswered, once the read timeout has passed since its first byte.
func respByteAtATime(addr string) func(ctx context.Context, a *respAttack) {
	cmd := encode("PING")
	return func(ctx context.Context, a *respAttack) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			a.saw(false, "dial: "+err.Error(), 0)
			return
		}
		defer conn.Close()
		closed := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(conn); closed <- b }()
		start := time.Now()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; {
			select {
			case got := <-closed:
				a.saw(len(got) == 0 && i < len(cmd), fmt.Sprintf("%q after %d bytes", got, i), time.Since(start))
				return
			case <-ctx.Done():
				a.saw(false, fmt.Sprintf("not cut off after %d bytes", i), time.Since(start))
				return
			case <-tick.C:
				if i < len(cmd) {
					conn.Write([]byte{cmd[i]})
					i++
				}
			}
		}
	}
}

// respGuesses tries made-up tokens in every form AUTH takes, pipelined: three are refused,
// then the connection is closed (the PING after them unanswered); over and over.
func respGuesses(addr string, tried *sync.Map) func(ctx context.Context, a *respAttack) {
	return func(ctx context.Context, a *respAttack) {
		for ctx.Err() == nil {
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				continue
			}
			start := time.Now()
			var b strings.Builder
			for i := range 5 {
				g := "guess-" + strconv.FormatUint(rand.Uint64(), 36)
				tried.Store(g, true)
				switch i % 3 {
				case 0:
					b.WriteString(encode("AUTH", g))
				case 1:
					b.WriteString(encode("AUTH", "default", g))
				case 2:
					b.WriteString(encode("HELLO", "2", "AUTH", "default", g))
				}
			}
			b.WriteString(encode("PING"))
			go io.WriteString(conn, b.String())
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(conn)
			want := strings.Repeat("-WRONGPASS invalid username-password pair or user is disabled.\r\n", 3)
			var ne net.Error
			a.saw(string(got) == want && !(errors.As(err, &ne) && ne.Timeout()), fmt.Sprintf("%q, %v", got, err), time.Since(start))
			conn.Close()
		}
	}
}
