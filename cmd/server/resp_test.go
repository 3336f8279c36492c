package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/resp"
	"github.com/bigseg/bigseg/segments"
)

// respAddr is the address of the Redis-protocol listener of a program whose logs are l.
func respAddr(t testing.TB, l *logs) string {
	t.Helper()
	return l.wait(t, "Redis-protocol listener")["addr"].(string)
}

// withRESP is env with the Redis-protocol listener on a free loopback port, and kv on top.
func withRESP(env map[string]string, kv ...string) map[string]string {
	out := map[string]string{"BIGSEG_RESP_ADDR": "127.0.0.1:0"}
	for k, v := range env {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// respClient is a go-redis client of the listener at addr, configured by opts (Addr set),
// closed when the test ends. It does not retry, so that every error shows.
func respClient(t testing.TB, addr string, opts goredis.Options) *goredis.Client {
	t.Helper()
	opts.Addr = addr
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1
	}
	c := goredis.NewClient(&opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// respKeys are the keys an SDK's Redis Big Segment store reads, under prefix.
type respKeys struct{ prefix string }

func (k respKeys) synchronizedOn() string { return k.prefix + ":big_segments_synchronized_on" }
func (k respKeys) include(key string) string {
	return k.prefix + ":big_segment_include:" + segments.Hash(key)
}
func (k respKeys) exclude(key string) string {
	return k.prefix + ":big_segment_exclude:" + segments.Hash(key)
}

// respReads are the two reads an SDK's store makes, by some client: get answers "" for nil.
type respReads struct {
	get      func(key string) (string, error)
	smembers func(key string) ([]string, error)
}

func goRedisReads(rc *goredis.Client) respReads {
	ctx := context.Background()
	return respReads{
		get: func(key string) (string, error) {
			v, err := rc.Get(ctx, key).Result()
			if errors.Is(err, goredis.Nil) {
				return "", nil
			}
			return v, err
		},
		smembers: func(key string) ([]string, error) {
			members, err := rc.SMembers(ctx, key).Result()
			slices.Sort(members)
			return members, err
		},
	}
}

// redisCLIReads runs redis-cli against addr for each read, with args (such as -a token)
// before the command; an answer that is an error reply is returned as an error.
func redisCLIReads(t *testing.T, addr string, args ...string) respReads {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli is not installed")
	}
	host, port, _ := net.SplitHostPort(addr)
	run := func(cmd ...string) ([]string, error) {
		argv := append([]string{"-h", host, "-p", port, "--no-auth-warning"}, args...)
		out, err := exec.Command("redis-cli", append(argv, cmd...)...).Output()
		if err != nil {
			return nil, fmt.Errorf("redis-cli %v: %v", cmd, err)
		}
		text := strings.TrimSpace(string(out))
		for _, kind := range []string{"ERR ", "NOAUTH ", "WRONGPASS ", "NOPROTO "} {
			if strings.HasPrefix(text, kind) {
				return nil, errors.New(text)
			}
		}
		if text == "" {
			return nil, nil
		}
		return strings.Split(text, "\n"), nil
	}
	return respReads{
		get: func(key string) (string, error) {
			lines, err := run("GET", key)
			return strings.Join(lines, "\n"), err
		},
		smembers: func(key string) ([]string, error) {
			lines, err := run("SMEMBERS", key)
			slices.Sort(lines)
			return lines, err
		},
	}
}

// respContexts are the contexts of the listener's tests, as included and excluded refs: alice
// has a ref in both sets (included wins, as the SDKs evaluate it), nobody is in neither.
var respContexts = map[string][2][]string{
	"alice": {{"beta.g1", "both.g1"}, {"blocked.g1", "both.g1"}},
	"bob":   {nil, {"beta.g1"}},
	"carol": {{"vip.g2"}, nil},
}

// respWant is what the SMEMBERS of each context's include and exclude set answer.
var respWant = map[string][2][]string{
	"alice":  {{"beta.g1", "both.g1"}, {"blocked.g1"}},
	"bob":    {nil, {"beta.g1"}},
	"carol":  {{"vip.g2"}, nil},
	"nobody": {nil, nil},
}

// respSeedFile writes respContexts as a fixture for the embedded store, synchronized at synced.
func respSeedFile(t *testing.T, synced time.Time) string {
	t.Helper()
	contexts := map[string]map[string][]string{}
	for k, refs := range respContexts {
		contexts[k] = map[string][]string{"included": refs[0], "excluded": refs[1]}
	}
	b, err := json.Marshal(map[string]any{"contexts": contexts, "synchronizedOn": synced.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "seed.json")
	writeFile(t, path, string(b))
	return path
}

// respStatus is the synchronization time /status reports, in unix milliseconds, as a string
// as GET synchronized_on answers it ("" when never synchronized).
func respStatus(t *testing.T, srv *server) string {
	t.Helper()
	_, body := srv.get(t, "/status")
	st := apitest.Decode[struct {
		LastSynchronizedOn int64 `json:"lastSynchronizedOn"`
	}](t, body)
	if st.LastSynchronizedOn == 0 {
		return ""
	}
	return strconv.FormatInt(st.LastSynchronizedOn, 10)
}

// respPolled waits for the program's first status poll: GET synchronized_on answers an error
// until then.
func respPolled(t *testing.T, r respReads, k respKeys) {
	t.Helper()
	waitFor(t, "the first status poll", func() bool { _, err := r.get(k.synchronizedOn()); return err == nil })
}

// TestRESPReads: the reads an SDK's Redis Big Segment store makes, through go-redis speaking
// RESP2 or asking for RESP3 (told NOPROTO, it falls back), with and without a token (the
// password, alone or after a user name as with ACLs), and through redis-cli, over Redis with a
// prefix of the test's own and over the embedded store: every context's sets as the store has
// them (a ref in both, included), GET synchronized_on as /status has it, and a key of another
// prefix refused with an error naming the prefix served. Without the token, or with a wrong
// one, nothing is read.
func TestRESPReads(t *testing.T) {
	t.Parallel()
	const token = "resp-t0ken"
	synced := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	stores := []struct {
		name string
		env  func(t *testing.T) (map[string]string, respKeys)
	}{
		{"redis", func(t *testing.T) (map[string]string, respKeys) {
			c := redistest.Client(t)
			prefix := redistest.Prefix(t, c)
			seedRedis(t, c, prefix, respContexts, synced)
			return map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": prefix}, respKeys{prefix}
		}},
		{"embedded", func(t *testing.T) (map[string]string, respKeys) {
			return map[string]string{"BIGSEG_SEED_FILE": respSeedFile(t, synced), "BIGSEG_PREFIX": "ld-test"}, respKeys{"ld-test"}
		}},
	}
	clients := []struct {
		name   string
		tokens bool
		reads  func(t *testing.T, addr string) respReads
	}{
		{"go-redis RESP2", false, func(t *testing.T, addr string) respReads {
			return goRedisReads(respClient(t, addr, goredis.Options{Protocol: 2}))
		}},
		{"go-redis RESP3 asked", false, func(t *testing.T, addr string) respReads {
			return goRedisReads(respClient(t, addr, goredis.Options{Protocol: 3}))
		}},
		{"redis-cli", false, func(t *testing.T, addr string) respReads { return redisCLIReads(t, addr) }},
		{"go-redis RESP2, token", true, func(t *testing.T, addr string) respReads {
			return goRedisReads(respClient(t, addr, goredis.Options{Protocol: 2, Password: token}))
		}},
		{"go-redis RESP3 asked, token", true, func(t *testing.T, addr string) respReads {
			return goRedisReads(respClient(t, addr, goredis.Options{Protocol: 3, Password: token}))
		}},
		{"go-redis RESP2, user and token", true, func(t *testing.T, addr string) respReads {
			return goRedisReads(respClient(t, addr, goredis.Options{Protocol: 2, Username: "sdk", Password: token}))
		}},
		{"go-redis RESP3 asked, user and token", true, func(t *testing.T, addr string) respReads {
			return goRedisReads(respClient(t, addr, goredis.Options{Protocol: 3, Username: "sdk", Password: token}))
		}},
		{"redis-cli -a token", true, func(t *testing.T, addr string) respReads { return redisCLIReads(t, addr, "-a", token) }},
		{"redis-cli --user --pass", true, func(t *testing.T, addr string) respReads {
			return redisCLIReads(t, addr, "--user", "default", "--pass", token)
		}},
	}
	for _, store := range stores {
		t.Run(store.name, func(t *testing.T) {
			env, keys := store.env(t)
			open := start(t, withRESP(env))
			secured := start(t, withRESP(env, "BIGSEG_API_TOKENS", token))
			for _, c := range clients {
				t.Run(c.name, func(t *testing.T) {
					srv := open
					if c.tokens {
						srv = secured
					}
					r := c.reads(t, respAddr(t, srv.logs))
					respPolled(t, r, keys)
					if got, err := r.get(keys.synchronizedOn()); err != nil || got != respStatus(t, srv) || got != strconv.FormatInt(synced.UnixMilli(), 10) {
						t.Errorf("GET synchronized_on: %q, %v; /status says %q", got, err, respStatus(t, srv))
					}
					for key, want := range respWant {
						inc, err := r.smembers(keys.include(key))
						if err != nil {
							t.Fatalf("SMEMBERS %s's include set: %v", key, err)
						}
						exc, err := r.smembers(keys.exclude(key))
						if err != nil {
							t.Fatalf("SMEMBERS %s's exclude set: %v", key, err)
						}
						if diff := cmp.Diff(want, [2][]string{inc, exc}, cmpEmptyIsNil); diff != "" {
							t.Errorf("%s's include and exclude sets (-want +got):\n%s", key, diff)
						}
					}
					other := respKeys{"launchdarkly"}
					for _, read := range []func() error{
						func() error { _, err := r.get(other.synchronizedOn()); return err },
						func() error { _, err := r.smembers(other.include("alice")); return err },
					} {
						if err := read(); err == nil || !strings.Contains(err.Error(), `bigseg serves the Big Segments of prefix "`+keys.prefix+`"`) {
							t.Errorf("a key of prefix launchdarkly: %v, want an error naming the prefix %q", err, keys.prefix)
						}
					}
				})
			}
			t.Run("without the token, or a wrong one", func(t *testing.T) {
				addr := respAddr(t, secured.logs)
				none := respClient(t, addr, goredis.Options{Protocol: 2})
				if err := none.Get(context.Background(), keys.synchronizedOn()).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
					t.Errorf("GET without a token: %v, want NOAUTH", err)
				}
				if err := none.SMembers(context.Background(), keys.include("alice")).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
					t.Errorf("SMEMBERS without a token: %v, want NOAUTH", err)
				}
				for _, protocol := range []int{2, 3} {
					wrong := respClient(t, addr, goredis.Options{Protocol: protocol, Password: "not-" + token})
					if err := wrong.Get(context.Background(), keys.synchronizedOn()).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
						t.Errorf("RESP%d with a wrong token: %v, want WRONGPASS", protocol, err)
					}
				}
				if _, err := redisCLIReads(t, addr, "-a", "not-"+token).smembers(keys.include("alice")); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
					t.Errorf("redis-cli with a wrong token: %v, want NOAUTH (its AUTH refused)", err)
				}
			})
		})
	}
}

// cmpEmptyIsNil compares an empty set and none alike: clients answer either.
var cmpEmptyIsNil = cmp.Transformer("emptyIsNil", func(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
})

// TestRESPStoreError: with Redis gone, GET synchronized_on and the SMEMBERS of every context
// answer error replies, never an empty set (which an SDK would take for "in no segment"), and
// the answers come back once Redis does.
func TestRESPStoreError(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := rs.Client()
	synced := time.Now().Truncate(time.Millisecond)
	seedRedis(t, c, "launchdarkly", respContexts, synced)
	srv := start(t, withRESP(faultEnv(rs.URL(), "BIGSEG_CACHE_SIZE", "0")))
	r := goRedisReads(respClient(t, respAddr(t, srv.logs), goredis.Options{}))
	keys := respKeys{"launchdarkly"}
	respPolled(t, r, keys)
	answers := func() (string, map[string][2][]string, error) {
		got, err := r.get(keys.synchronizedOn())
		if err != nil {
			return "", nil, err
		}
		sets := map[string][2][]string{}
		for key := range respWant {
			inc, err := r.smembers(keys.include(key))
			if err != nil {
				return "", nil, err
			}
			exc, err := r.smembers(keys.exclude(key))
			if err != nil {
				return "", nil, err
			}
			sets[key] = [2][]string{inc, exc}
		}
		return got, sets, nil
	}
	check := func(when string) {
		t.Helper()
		got, sets, err := answers()
		if err != nil || got != strconv.FormatInt(synced.UnixMilli(), 10) {
			t.Fatalf("%s: GET synchronized_on %q, %v", when, got, err)
		}
		if diff := cmp.Diff(respWant, sets, cmpEmptyIsNil); diff != "" {
			t.Errorf("%s (-want +got):\n%s", when, diff)
		}
	}
	check("with Redis up")

	rs.Shutdown() // saved: it comes back with the same data
	waitFor(t, "the poll that finds Redis gone", func() bool { _, err := r.get(keys.synchronizedOn()); return err != nil })
	var re goredis.Error
	if _, err := r.get(keys.synchronizedOn()); !errors.As(err, &re) || !strings.Contains(err.Error(), "ERR the Big Segment store is unavailable") {
		t.Errorf("GET synchronized_on with Redis down: %v, want an error reply", err)
	}
	for key := range respWant {
		for _, k := range []string{keys.include(key), keys.exclude(key)} {
			members, err := r.smembers(k)
			if !errors.As(err, &re) || !strings.Contains(err.Error(), "ERR the Big Segment store could not be read") {
				t.Errorf("SMEMBERS of %s's set with Redis down: %q, %v, want an error reply", key, members, err)
			}
		}
	}

	rs.Restart()
	waitFor(t, "answers once Redis is back", func() bool { _, _, err := answers(); return err == nil })
	check("with Redis back")
}

// pollWithin polls cond until it holds, failing the test if it has not within d; it returns
// how long it took.
func pollWithin(t *testing.T, what string, d time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	return time.Since(start)
}

// freshnessSlack is what a poll may take beyond its interval (a Redis round trip, a busy CI
// machine under -race).
const freshnessSlack = 3 * time.Second

// TestRESPRelayPatch: a patch written as the Relay Proxy writes it (a new cursor and set
// changes, then synchronized_on) is answered through the listener within one poll interval
// and a read, whatever the cache's TTL: the new ref, the removed ones gone (bob's last one
// too), and the new synchronization time.
func TestRESPRelayPatch(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	seedRedis(t, c, prefix, map[string][2][]string{"alice": {{"old.g1"}}, "bob": {{"gone.g1"}}}, time.Now().Add(-time.Minute))
	c.Set(context.Background(), cursorKey(prefix), "v1", 0)
	env := freshnessEnv(prefix)
	env["BIGSEG_REDIS_URL"] = redistest.URL(t)
	srv := start(t, withRESP(env))
	r := goRedisReads(respClient(t, respAddr(t, srv.logs), goredis.Options{}))
	keys := respKeys{prefix}
	respPolled(t, r, keys)
	for range 2 { // the second from the cache
		if got, err := r.smembers(keys.include("alice")); err != nil || !slices.Equal(got, []string{"old.g1"}) {
			t.Fatalf("alice before the patch: %q, %v", got, err)
		}
		if got, err := r.smembers(keys.include("bob")); err != nil || !slices.Equal(got, []string{"gone.g1"}) {
			t.Fatalf("bob before the patch: %q, %v", got, err)
		}
	}
	relayPatch(t, c, prefix, "v2", map[string][]string{"alice": {"new.g1"}}, map[string][]string{"alice": {"old.g1"}, "bob": {"gone.g1"}})
	syncedOn, err := c.Get(context.Background(), synchronizedOnKey(prefix)).Result()
	if err != nil {
		t.Fatal(err)
	}
	interval, _ := time.ParseDuration(env["BIGSEG_STATUS_POLL_INTERVAL"])
	took := pollWithin(t, "the patch answered through the listener", interval+freshnessSlack, func() bool {
		alice, err1 := r.smembers(keys.include("alice"))
		bob, err2 := r.smembers(keys.include("bob"))
		got, err3 := r.get(keys.synchronizedOn())
		return errors.Join(err1, err2, err3) == nil && slices.Equal(alice, []string{"new.g1"}) && len(bob) == 0 && got == syncedOn
	})
	t.Logf("the patch was answered %v after its commit (polls every %v)", took.Round(time.Millisecond), interval)
}

// TestRESPTLS: with BIGSEG_TLS_CERT_FILE the listener speaks TLS with the HTTP listener's
// certificate: a rediss:// client that trusts its CA reads, as does redis-cli --tls; a plain
// client, or one that does not trust the CA, reads nothing.
func TestRESPTLS(t *testing.T) {
	t.Parallel()
	files := redistest.NewTLS(t)
	d := newTLSDir(t, files)
	srv := start(t, withRESP(map[string]string{"BIGSEG_SEED_FILE": respSeedFile(t, time.Now()), "BIGSEG_PREFIX": "ld-test",
		"BIGSEG_TLS_CERT_FILE": d.cert, "BIGSEG_TLS_KEY_FILE": d.key}))
	addr := respAddr(t, srv.logs)
	if l := srv.logs.find("Redis-protocol listener"); len(l) != 1 || l[0]["tls"] != true {
		t.Errorf("start-up log: %v, want tls true", l)
	}
	keys := respKeys{"ld-test"}
	opts, err := goredis.ParseURL("rediss://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(files.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)
	opts.TLSConfig.RootCAs = pool
	secure := goRedisReads(respClient(t, addr, *opts))
	respPolled(t, secure, keys)
	if got, err := secure.smembers(keys.include("alice")); err != nil || !slices.Equal(got, respWant["alice"][0]) {
		t.Errorf("rediss:// client: %q, %v", got, err)
	}
	if _, err := exec.LookPath("redis-cli"); err == nil {
		host, port, _ := net.SplitHostPort(addr)
		out, err := exec.Command("redis-cli", "--tls", "--cacert", files.CAFile, "-h", host, "-p", port, "SMEMBERS", keys.exclude("alice")).Output()
		if err != nil || strings.TrimSpace(string(out)) != "blocked.g1" {
			t.Errorf("redis-cli --tls: %q, %v", out, err)
		}
	}

	plain := respClient(t, addr, goredis.Options{ReadTimeout: 2 * time.Second})
	if err := plain.Get(context.Background(), keys.synchronizedOn()).Err(); err == nil {
		t.Error("a plain client read from the TLS listener")
	}
	untrusting := &tls.Config{ServerName: "127.0.0.1", RootCAs: x509.NewCertPool()}
	stranger := respClient(t, addr, goredis.Options{TLSConfig: untrusting})
	if err := stranger.Get(context.Background(), keys.synchronizedOn()).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the CA: %v, want a certificate error", err)
	}
}

// heldProxy forwards connections to a Redis at target, and once armed holds the first
// write of a client that has word in it until release: a command in flight on a real Redis
// for as long as a test needs, and a sure sign that it is in flight.
type heldProxy struct {
	ln             net.Listener
	target         string
	word           []byte
	armed          atomic.Bool
	held, released chan struct{}
	holdOnce       sync.Once
	releaseOnce    sync.Once
	mu             sync.Mutex
	conns          []net.Conn
	wg             sync.WaitGroup
}

func newHeldProxy(t *testing.T, target, word string) *heldProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &heldProxy{ln: ln, target: target, word: []byte(word), held: make(chan struct{}), released: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.release()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *heldProxy) URL() string { return "redis://" + p.ln.Addr().String() }

func (p *heldProxy) release() { p.releaseOnce.Do(func() { close(p.released) }) }

func (p *heldProxy) accept() {
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
		p.wg.Go(func() { io.Copy(client, server); client.Close() })
		p.wg.Go(func() {
			defer server.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 && p.armed.Load() && bytes.Contains(bytes.ToLower(buf[:n]), p.word) {
					p.holdOnce.Do(func() { close(p.held) })
					<-p.released
				}
				if n > 0 {
					if _, err := server.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

// TestRESPDrainOnSIGTERM runs the program as a process and sends SIGTERM while a command is in
// flight (its read held on its way to Redis) and another connection is idle: the listener
// closes at once (new connections are refused), the idle connection is closed, the command
// in flight is answered, then its connection is closed too, and the process exits cleanly.
func TestRESPDrainOnSIGTERM(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := rs.Client()
	seedRedis(t, c, "launchdarkly", respContexts, time.Now())
	proxy := newHeldProxy(t, rs.Addr(), "smembers")
	p := startProcess(t, withRESP(map[string]string{"BIGSEG_REDIS_URL": proxy.URL() + "?read_timeout=20s", "BIGSEG_LOG_LEVEL": "info",
		"BIGSEG_CACHE_SIZE": "0", "BIGSEG_STATUS_POLL_INTERVAL": "1h", "BIGSEG_LOOKUP_TIMEOUT": "20s", "BIGSEG_WRITE_TIMEOUT": "1m"}))
	addr := respAddr(t, p.logs)
	keys := respKeys{"launchdarkly"}
	busy := respClient(t, addr, goredis.Options{PoolSize: 1})
	r := goRedisReads(busy)
	respPolled(t, r, keys)
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	idleAnswers := bufio.NewReader(idle)
	if _, err := io.WriteString(idle, "PING\r\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := idleAnswers.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING: %q, %v", line, err)
	}
	type result struct {
		members []string
		err     error
	}
	inFlight := make(chan result, 1)
	proxy.armed.Store(true)
	go func() {
		m, err := r.smembers(keys.include("alice"))
		inFlight <- result{m, err}
	}()
	select {
	case <-proxy.held:
	case <-time.After(20 * time.Second):
		t.Fatal("the lookup never reached Redis")
	}
	p.signal(t, syscall.SIGTERM)

	waitFor(t, "the listener closed", func() bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	})
	idle.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := idleAnswers.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the idle connection after SIGTERM: %d bytes, %v, want it closed", n, err)
	}
	select {
	case res := <-inFlight:
		t.Fatalf("the command in flight was answered before its read: %v", res)
	default:
	}
	proxy.release()
	select {
	case res := <-inFlight:
		if res.err != nil || !slices.Equal(res.members, respWant["alice"][0]) {
			t.Errorf("the command in flight at SIGTERM: %q, %v, want its answer", res.members, res.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the command in flight at SIGTERM: no answer in 20s")
	}
	if err := busy.Ping(context.Background()).Err(); err == nil {
		t.Error("the connection of the command in flight still answers after it")
	}
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Errorf("process exit: %v\nlogs:\n%s", err, p.logs.all())
	}
	if len(p.logs.find("stopped")) != 1 || len(p.logs.find("Redis-protocol listener: connections cut at the shutdown timeout")) != 0 {
		t.Errorf("no clean stop in the logs:\n%s", p.logs.all())
	}
}

// respRaw sends commands, RESP-encoded, on a connection of its own and returns the first
// line of each answer.
func respRaw(t *testing.T, addr string, cmds ...[]string) []string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	for _, args := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	go io.WriteString(conn, b.String())
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	var lines []string
	for range cmds {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("answer %d: %v", len(lines), err)
		}
		lines = append(lines, line)
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "$"); ok && n != "-1" { // a bulk string: skip its data
			size, _ := strconv.Atoi(n)
			if _, err := io.ReadFull(br, make([]byte, size+2)); err != nil {
				t.Fatal(err)
			}
		}
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "*"); ok { // an array of bulk strings
			count, _ := strconv.Atoi(n)
			for range 2 * count {
				if _, err := br.ReadString('\n'); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return lines
}

// respSeries are the series of the listener's command metrics, by their labels.
func respSeries(t *testing.T, srv *server) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	families := srv.scrape(t)
	for _, name := range []string{"bigseg_resp_commands_total", "bigseg_resp_command_duration_seconds"} {
		f, ok := families[name]
		if !ok {
			t.Fatalf("no metric %s", name)
		}
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

// TestRESPMetrics: commands are counted by name and result, those not answered (writes,
// made-up names) as "other", which no name a client makes up adds a series to; every command
// is timed under the same names; and the open connections are counted.
func TestRESPMetrics(t *testing.T) {
	t.Parallel()
	srv := start(t, withRESP(map[string]string{"BIGSEG_SEED_FILE": respSeedFile(t, time.Now()), "BIGSEG_PREFIX": "ld-test"}))
	addr := respAddr(t, srv.logs)
	keys := respKeys{"ld-test"}
	respPolled(t, goRedisReads(respClient(t, addr, goredis.Options{})), keys)
	before := respSeries(t, srv)
	cmds := [][]string{{"GET", keys.synchronizedOn()}, {"SMEMBERS", keys.include("alice")}, {"SMEMBERS", keys.exclude("alice")},
		{"PING"}, {"get", "launchdarkly:big_segments_synchronized_on"}, {"SET", "k", "v"}, {"FLUSHALL"}}
	for i := range 100 {
		cmds = append(cmds, []string{fmt.Sprintf("MADEUP%03d", i), "x"})
	}
	answers := respRaw(t, addr, cmds...)
	for i, a := range answers[5:] {
		if !strings.HasPrefix(a, "-ERR unknown command") {
			t.Fatalf("%v: %q, want an error", cmds[5+i], a)
		}
	}
	after := respSeries(t, srv)
	if len(after) != len(before) {
		t.Errorf("%d series after the commands, %d before: made-up names added series", len(after), len(before))
	}
	want := map[string]float64{
		"bigseg_resp_commands_total{command=get,result=ok}":      1,
		"bigseg_resp_commands_total{command=get,result=error}":   1, // another prefix
		"bigseg_resp_commands_total{command=smembers,result=ok}": 2,
		"bigseg_resp_commands_total{command=ping,result=ok}":     1,
		"bigseg_resp_commands_total{command=other,result=error}": 102,
		"bigseg_resp_command_duration_seconds{command=get}":      2,
		"bigseg_resp_command_duration_seconds{command=smembers}": 2,
		"bigseg_resp_command_duration_seconds{command=ping}":     1,
		"bigseg_resp_command_duration_seconds{command=other}":    102,
	}
	got := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			got[k] = d
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series changed by the commands (-want +got):\n%s", diff)
	}
	for k := range after {
		if !strings.Contains(k, "command=other") && !slices.ContainsFunc(resp.Commands(), func(c string) bool {
			return strings.Contains(k, "command="+c+"}") || strings.Contains(k, "command="+c+",")
		}) {
			t.Errorf("a series of a command not answered: %s", k)
		}
	}

	const idle = 3
	for range idle {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
	}
	// The idle connections, and respPolled's client.
	waitFor(t, "the open connections counted", func() bool { return srv.value(t, "bigseg_resp_open_connections") == idle+1 })
}
