package resp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
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
	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/resp"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs the listener over svc, one environment named default of prefix launchdarkly,
// until the test ends, and returns its address.
func serve(t *testing.T, svc *segments.Service, cfg resp.Config) string {
	t.Helper()
	return serveEnvironments(t, cfg, svc.Environments()[0])
}

// serveEnvironments runs the listener over envs until the test ends, and returns its address.
func serveEnvironments(t *testing.T, cfg resp.Config, envs ...*segments.Environment) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := resp.New(cfg, envs...)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// service is a segments.Service over an embedded store holding contexts by key, polled once.
func service(t *testing.T, contexts map[string]fixture.Context, cfg ...segments.Config) *segments.Service {
	t.Helper()
	f := &fixture.Fixture{}
	for k, c := range contexts {
		c.Key, c.Hash = k, segments.Hash(k)
		f.Contexts = append(f.Contexts, c)
	}
	svc := oneService(memory.New(f, time.Now), cfg...)
	svc.Poll(context.Background())
	return svc
}

// renamed is svc's one environment as one named name, of prefix, polled.
func renamed(t *testing.T, svc *segments.Service, name, prefix string) *segments.Environment {
	t.Helper()
	svc, err := segments.New([]segments.Environment{{Name: name, Prefix: prefix, Store: svc.Environments()[0].Store}}, segments.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Poll(context.Background())
	return svc.Environments()[0]
}

var contexts = map[string]fixture.Context{
	"alice": {Included: []string{"beta.g1", "both.g1"}, Excluded: []string{"both.g1", "blocked.g1"}},
	"bob":   {Excluded: []string{"beta.g1"}},
}

func client(t *testing.T, addr string, protocol int, password string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: protocol, Password: password, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// The reads an SDK's store makes, through go-redis speaking RESP2 and asking for RESP3 (told
// NOPROTO, it falls back), with and without a token.
func TestSDKReads(t *testing.T) {
	tokens, _ := auth.NewTokens([]string{"s3cret"}, "", slog.New(slog.DiscardHandler), nil)
	for _, c := range []struct {
		name     string
		protocol int
		tokens   *auth.Tokens
		password string
	}{
		{"RESP2", 2, nil, ""},
		{"RESP3 asked", 3, nil, ""},
		{"RESP2 with a token", 2, tokens, "s3cret"},
		{"RESP3 asked, with a token", 3, tokens, "s3cret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := service(t, contexts)
			rc := client(t, serve(t, svc, resp.Config{Tokens: c.tokens}), c.protocol, c.password)
			ctx := context.Background()
			st, _ := svc.Environments()[0].Status()
			if got, err := rc.Get(ctx, "launchdarkly:big_segments_synchronized_on").Result(); err != nil || got != strconv.FormatInt(st.LastSynchronized.UnixMilli(), 10) {
				t.Errorf("GET synchronized_on: %q, %v", got, err)
			}
			for key, want := range map[string][2][]string{
				"alice":  {{"beta.g1", "both.g1"}, {"blocked.g1"}}, // both.g1: included wins, as in the SDKs
				"bob":    {{}, {"beta.g1"}},
				"nobody": {{}, {}},
			} {
				h := segments.Hash(key)
				inc, err := rc.SMembers(ctx, "launchdarkly:big_segment_include:"+h).Result()
				if err != nil {
					t.Fatal(err)
				}
				exc, err := rc.SMembers(ctx, "launchdarkly:big_segment_exclude:"+h).Result()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, [2][]string{inc, exc}); diff != "" {
					t.Errorf("%s (-want +got):\n%s", key, diff)
				}
			}
		})
	}
}

// errorText is the error reply of a command sent with a raw client.
func errorText(t *testing.T, rc *goredis.Client, args ...any) string {
	t.Helper()
	err := rc.Do(context.Background(), args...).Err()
	var re goredis.Error
	if !errors.As(err, &re) {
		t.Fatalf("%v: %v, want an error reply", args, err)
	}
	return err.Error()
}

func TestRefusals(t *testing.T) {
	rc := client(t, serveEnvironments(t, resp.Config{}, renamed(t, service(t, contexts), "production", "ld-prod")), 2, "")
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{"SET", "ld-prod:big_segments_synchronized_on", "1"}, `ERR unknown command 'set': bigseg serves the Big Segments of prefix "ld-prod"`},
		{[]any{"FLUSHALL"}, "ERR unknown command 'flushall'"},
		{[]any{"EVAL", "return 1", "0"}, "ERR unknown command 'eval'"},
		{[]any{"CONFIG", "SET", "maxmemory", "1"}, "ERR unknown command 'config'"},
		{[]any{"GET", "launchdarkly:big_segments_synchronized_on"}, `ERR bigseg serves the Big Segments of prefix "ld-prod"`},
		{[]any{"SMEMBERS", "launchdarkly:big_segment_include:" + segments.Hash("alice")}, `prefix "ld-prod"`},
		{[]any{"SMEMBERS", "ld-prod:big_segment_include:not base64!"}, "ERR context hash has a character outside the standard base64 alphabet at offset 3; a context hash is the standard base64"},
		{[]any{"SMEMBERS", "ld-prod:big_segment_exclude:" + hexSHA256("alice")}, "ERR context hash looks like hex; a context hash is the standard base64"},
		{[]any{"SMEMBERS", "ld-prod:big_segment_include:" + segments.Hash("alice")[:42] + "B="}, "ERR context hash is not canonical padded base64"},
		{[]any{"SMEMBERS", "ld-prod:big_segments_synchronized_on"}, "ERR bigseg serves"},
		{[]any{"GET", "ld-prod:big_segments_cursor"}, "ERR bigseg serves"},
		{[]any{"SELECT", "1"}, "ERR DB index is out of range"},
		{[]any{"GET"}, "ERR wrong number of arguments for 'get' command"},
		{[]any{"HELLO", "4"}, "NOPROTO"},
		{[]any{"HELLO", "two"}, "ERR Protocol version is not an integer"},
		{[]any{"HELLO", "02"}, "ERR Protocol version is not an integer"},
		{[]any{"HELLO", "+2"}, "ERR Protocol version is not an integer"},
		{[]any{"CLIENT", "SETNAME", "a\r\nb"}, "ERR Client names cannot contain spaces, newlines or special characters"},
		{[]any{"HELLO", "2", "SETNAME", "a b"}, "ERR Client names cannot contain"},
		{[]any{"CLIENT", "KILL", "1"}, "ERR bigseg answers CLIENT SETNAME, GETNAME, ID and SETINFO only"},
	} {
		if got := errorText(t, rc, c.args...); !strings.Contains(got, c.want) {
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
	for _, args := range [][]any{{"PING"}, {"ECHO", "x"}, {"SELECT", "0"}, {"CLIENT", "SETNAME", "sdk"}, {"CLIENT", "GETNAME"},
		{"CLIENT", "ID"}, {"CLIENT", "SETINFO", "LIB-NAME", "x"}, {"INFO"}, {"COMMAND"}, {"COMMAND", "COUNT"}, {"HELLO", "2"}} {
		if err := rc.Do(context.Background(), args...).Err(); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// With tokens, every command but AUTH, HELLO, PING, QUIT and RESET needs AUTH first; wrong tokens
// are refused, and after three the connection is closed.
func TestTokens(t *testing.T) {
	tokens, _ := auth.NewTokens([]string{"s3cret"}, "", slog.New(slog.DiscardHandler), nil)
	addr := serve(t, service(t, contexts), resp.Config{Tokens: tokens})
	exchange := inline(t, addr)
	if got := exchange("GET launchdarkly:big_segments_synchronized_on"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("GET before AUTH: %q", got)
	}
	if got := exchange("PING"); got != "+PONG\r\n" {
		t.Errorf("PING before AUTH: %q", got)
	}
	// With tokens, the prefixes served are told only to a client signed in.
	if got := exchange("KEYS *"); !strings.HasPrefix(got, "-ERR unknown command 'keys': bigseg serves Big Segments only: GET {prefix}:big_segments_synchronized_on") || strings.Contains(got, "launchdarkly") {
		t.Errorf("an unknown command before AUTH: %q, want the keys' shape without the prefix", got)
	}
	for i := range 3 {
		if got := exchange("AUTH default wrong"); !strings.HasPrefix(got, "-WRONGPASS") {
			t.Errorf("wrong token %d: %q", i, got)
		}
	}
	if got := exchange("PING"); got != "" {
		t.Errorf("after three wrong tokens: %q, want the connection closed", got)
	}
	rc := client(t, addr, 2, "s3cret")
	if err := rc.Get(context.Background(), "launchdarkly:big_segments_synchronized_on").Err(); err != nil {
		t.Errorf("with the token: %v", err)
	}
	// A wrong AUTH after a good one signs the connection out (Redis would keep the earlier
	// sign-in): stricter, on purpose, and docs/sdks.md says so.
	again := inline(t, addr)
	if got := again("AUTH default s3cret"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	if got := again("AUTH default wrong"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Errorf("a wrong AUTH after a good one: %q", got)
	}
	if got := again("GET launchdarkly:big_segments_synchronized_on"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("GET after a wrong AUTH that followed a good one: %q, want NOAUTH", got)
	}
}

// A connection signed in with a token that the tokens file then revokes is refused at its next
// command, whatever it is (PING too), and closed; a HELLO refused sets no name.
func TestRevokedSession(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte("s3cret\n"), 0o600)
	tokens, err := auth.NewTokens(nil, file, slog.New(slog.DiscardHandler), nil, "default")
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, service(t, contexts), resp.Config{Tokens: tokens})
	exchange := inline(t, addr)
	if got := exchange("HELLO 2 SETNAME early"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("HELLO SETNAME before AUTH: %q", got)
	}
	if got := exchange("AUTH s3cret"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	if got := exchange("CLIENT GETNAME"); got != "$-1\r\n" {
		t.Errorf("the name after a HELLO refused: %q, want none", got)
	}
	os.WriteFile(file, []byte("another\n"), 0o600)
	tokens.Reload()
	if got := exchange("PING"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("PING once the token is revoked: %q, want NOAUTH", got)
	}
	if got := exchange("PING"); got != "" {
		t.Errorf("after the refusal: %q, want the connection closed", got)
	}
}

// Shutdown before Serve has begun (a program stopped as it starts): Serve returns at once
// instead of accepting on a listener no one will close.
func TestRESPShutdownBeforeServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := resp.New(resp.Config{}, service(t, contexts).Environments()[0])
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after Shutdown: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		ln.Close()
		<-done
		t.Fatal("Serve after Shutdown still accepting after 10s")
	}
}

// A listener closed by someone else than Shutdown or Close ends Serve with an error, as
// net/http's does, so that the program that runs it ends instead of serving on without it.
func TestRESPServeFailsWhenItsListenerIsClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := resp.New(resp.Config{}, service(t, contexts).Environments()[0])
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	client(t, ln.Addr().String(), 1, "").Ping(context.Background()) // Serve is accepting
	ln.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve on a listener closed under it: %v, want net.ErrClosed", err)
	}
}

// flakyListener fails its first Accepts as a process out of file descriptors does.
type flakyListener struct {
	net.Listener
	failures atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// An Accept that fails for want of file descriptors (EMFILE: every connection slot of a small
// ulimit taken) is retried after a pause, as net/http does: the listener goes on serving once
// descriptors are free, instead of stopping for good.
func TestRESPServeSurvivesAcceptErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: ln}
	fl.failures.Store(3)
	srv := resp.New(resp.Config{}, service(t, contexts).Environments()[0])
	done := make(chan error, 1)
	go func() { done <- srv.Serve(fl) }()
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	rc := client(t, ln.Addr().String(), 2, "")
	if err := rc.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after %d failed Accepts: %v", 3, err)
	}
}

// A token scoped to some environments opens the listener only if the environment it serves is
// one of them: before, any valid token did, so that a token of one environment read another's
// memberships. With no environment named, only tokens that open every one are accepted.
func TestRESPTokenScopes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("prod-token production\nstaging-token staging\nevery-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokens(nil, file, slog.New(slog.DiscardHandler), nil, "production", "staging")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveEnvironments(t, resp.Config{Tokens: tokens},
		renamed(t, service(t, contexts), "production", "ld-prod"),
		renamed(t, service(t, contexts), "staging", "ld-staging"))
	for _, c := range []struct {
		prefix, token string
		want          string // the error, "" for none
	}{
		{"ld-prod", "prod-token", ""},
		{"ld-prod", "every-token", ""},
		{"ld-staging", "every-token", ""},
		{"ld-prod", "staging-token", `NOPERM this token does not open environment production (prefix "ld-prod")`},
		{"ld-staging", "staging-token", ""},
		{"ld-prod", "no-token", "WRONGPASS invalid username-password pair"},
	} {
		for _, protocol := range []int{2, 3} {
			rc := client(t, addr, protocol, c.token)
			for _, cmd := range []*goredis.Cmd{
				rc.Do(context.Background(), "SMEMBERS", c.prefix+":big_segment_include:"+segments.Hash("alice")),
				rc.Do(context.Background(), "GET", c.prefix+":big_segments_synchronized_on"),
			} {
				if err := cmd.Err(); c.want == "" && err != nil || c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)) {
					t.Errorf("%s with %s, RESP%d: %v, want %q", cmd.Args()[0], c.token, protocol, err, c.want)
				}
			}
		}
	}
}

// The prefix of the key selects the environment; a prefix not served is an error naming
// those served.
func TestRESPEnvironments(t *testing.T) {
	prod := service(t, map[string]fixture.Context{"alice": {Included: []string{"prod.g1"}}})
	staging := service(t, map[string]fixture.Context{"alice": {Included: []string{"staging.g1"}}})
	rc := client(t, serveEnvironments(t, resp.Config{},
		renamed(t, prod, "production", "ld-prod"),
		renamed(t, staging, "staging", "ld-staging")), 2, "")
	ctx := context.Background()
	h := segments.Hash("alice")
	for prefix, want := range map[string]string{"ld-prod": "prod.g1", "ld-staging": "staging.g1"} {
		if got, err := rc.SMembers(ctx, prefix+":big_segment_include:"+h).Result(); err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("%s: %v %v, want [%s]", prefix, got, err, want)
		}
		if err := rc.Get(ctx, prefix+":big_segments_synchronized_on").Err(); err != nil {
			t.Errorf("%s synchronized_on: %v", prefix, err)
		}
	}
	err := rc.SMembers(ctx, "launchdarkly:big_segment_include:"+h).Err()
	if err == nil || !strings.Contains(err.Error(), `prefixes "ld-prod", "ld-staging"`) {
		t.Errorf("a prefix not served: %v", err)
	}
}

// TestRESPEmptyPrefix: an environment whose store has no prefix (DynamoDB's default) is served
// under the SDKs' default, launchdarkly, and named so to a client asking for another.
func TestRESPEmptyPrefix(t *testing.T) {
	env := renamed(t, service(t, contexts), "default", "")
	rc := client(t, serveEnvironments(t, resp.Config{}, env), 2, "")
	ctx := context.Background()
	got, err := rc.SMembers(ctx, "launchdarkly:big_segment_include:"+segments.Hash("alice")).Result()
	if slices.Sort(got); err != nil || !slices.Equal(got, []string{"beta.g1", "both.g1"}) {
		t.Errorf("launchdarkly: %v %v", got, err)
	}
	if err := rc.SMembers(ctx, ":big_segment_include:"+segments.Hash("alice")).Err(); err == nil || !strings.Contains(err.Error(), `prefix "launchdarkly"`) {
		t.Errorf("the empty prefix itself: %v", err)
	}
}

// TestHTTPIsRefused: HTTP sent to the listener (a browser made to, cross-protocol scripting)
// is answered by nothing and closed at its POST or Host: line, as Redis does.
func TestHTTPIsRefused(t *testing.T) {
	addr := serve(t, service(t, contexts), resp.Config{})
	for _, req := range []string{"POST / HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, req)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(conn)
		conn.Close()
		if err != nil || strings.Contains(string(got), "Host") || strings.Count(string(got), "\r\n") > 1 {
			t.Errorf("%q: answered %q, %v; want at most the GET's error, then the connection closed", req, got, err)
		}
	}
}

// inline connects to addr and returns a function that sends one inline command and returns
// what is answered at once ("" once the connection is closed).
func inline(t *testing.T, addr string) func(cmd string) string {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return func(cmd string) string {
		t.Helper()
		c.Write([]byte(cmd + "\r\n"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 512)
		n, _ := c.Read(b)
		return string(b[:n])
	}
}

// countingLookups is an observer that counts lookups.
type countingLookups struct{ lookups atomic.Int64 }

func (o *countingLookups) Lookup(segments.LookupStatus, bool)             { o.lookups.Add(1) }
func (o *countingLookups) StoreRead(string, time.Duration, error)         {}
func (o *countingLookups) StatusPolled(segments.StoreStatus, error, bool) {}
func (o *countingLookups) DataChanged()                                   {}

// TestPairedSets: the SMEMBERS of a context's exclude set right after that of its include set
// (or the other way round) is answered from the same lookup, one after the other or pipelined;
// after another command, or of another context, it is a lookup of its own.
func TestPairedSets(t *testing.T) {
	svc := &countingLookups{}
	addr := serve(t, service(t, contexts, segments.Config{Observer: func(*segments.Environment) segments.Observer { return svc }}), resp.Config{})
	inc := func(k string) string { return "launchdarkly:big_segment_include:" + segments.Hash(k) }
	exc := func(k string) string { return "launchdarkly:big_segment_exclude:" + segments.Hash(k) }
	for _, c := range []struct {
		name      string
		cmds      [][]any
		pipelined bool
		lookups   int64
	}{
		{"include then exclude", [][]any{{"SMEMBERS", inc("alice")}, {"SMEMBERS", exc("alice")}}, false, 1},
		{"exclude then include", [][]any{{"SMEMBERS", exc("alice")}, {"SMEMBERS", inc("alice")}}, false, 1},
		{"pipelined", [][]any{{"SMEMBERS", inc("alice")}, {"SMEMBERS", exc("alice")}}, true, 1},
		{"a pair, then a pair", [][]any{{"SMEMBERS", inc("alice")}, {"SMEMBERS", exc("alice")}, {"SMEMBERS", inc("alice")}, {"SMEMBERS", exc("alice")}}, false, 2},
		{"a command between", [][]any{{"SMEMBERS", inc("alice")}, {"PING"}, {"SMEMBERS", exc("alice")}}, false, 2},
		{"another context", [][]any{{"SMEMBERS", inc("alice")}, {"SMEMBERS", exc("bob")}}, false, 2},
		{"the same set twice", [][]any{{"SMEMBERS", inc("alice")}, {"SMEMBERS", inc("alice")}}, true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1})
			defer rc.Close()
			ctx := context.Background()
			if err := rc.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			before := svc.lookups.Load()
			if c.pipelined {
				if _, err := rc.Pipelined(ctx, func(p goredis.Pipeliner) error {
					for _, args := range c.cmds {
						p.Do(ctx, args...)
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			} else {
				for _, args := range c.cmds {
					if err := rc.Do(ctx, args...).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if n := svc.lookups.Load() - before; n != c.lookups {
				t.Errorf("%d lookups, want %d", n, c.lookups)
			}
		})
	}
}

// TestLargeAnswer: an answer far larger than the listener's buffer, sent in pieces as it is
// made, arrives whole and in order, between the answers of the commands pipelined around it;
// it counts as answered, not failed, though its refs begin with '-' as error replies do.
func TestLargeAnswer(t *testing.T) {
	var refs []string
	for i := range 20_000 {
		refs = append(refs, fmt.Sprintf("-segment-%05d.g1", i))
	}
	// Refs around and well past a piece's size are sent a piece at a time too.
	for _, n := range []int{32<<10 - 1, 32 << 10, 32<<10 + 1, 1 << 20} {
		refs = append(refs, strings.Repeat("r", n))
	}
	var mu sync.Mutex
	var failed []string
	observe := func(command string, fail bool, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			failed = append(failed, command)
		}
	}
	rc := client(t, serve(t, service(t, map[string]fixture.Context{"large": {Included: refs}}), resp.Config{Observe: observe}), 2, "")
	ctx := context.Background()
	var members *goredis.StringSliceCmd
	var pong *goredis.StatusCmd
	if _, err := rc.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Select(ctx, 0) // "+OK\r\n": the large answer's pieces begin "$17\r\n-" after as many bytes
		members = p.SMembers(ctx, "launchdarkly:big_segment_include:"+segments.Hash("large"))
		pong = p.Ping(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(refs, members.Val()); diff != "" {
		t.Errorf("the large set (-want +got):\n%s", diff)
	}
	if pong.Val() != "PONG" {
		t.Errorf("the PING after it: %q", pong.Val())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Errorf("commands counted as failed: %v", failed)
	}
}

// hexSHA256 is the SHA-256 of key in hex: 64 characters, valid base64 of 48 bytes, not a hash.
func hexSHA256(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
