package resp_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/internal/guard"
	"github.com/bigseg/bigseg/resp"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs the listener over svc until the test ends, and returns its address.
func serve(t *testing.T, svc resp.Service, cfg resp.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "launchdarkly"
	}
	srv := resp.New(svc, cfg)
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
func service(t *testing.T, contexts map[string]fixture.Context, opts ...segments.Option) *segments.Service {
	t.Helper()
	f := &fixture.Fixture{}
	for k, c := range contexts {
		c.Key, c.Hash = k, segments.Hash(k)
		f.Contexts = append(f.Contexts, c)
	}
	svc := segments.New(memory.New(f, time.Now), opts...)
	svc.Poll(context.Background())
	return svc
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
	tokens, _ := guard.NewTokens([]string{"s3cret"}, "", slog.New(slog.DiscardHandler), nil)
	for _, c := range []struct {
		name     string
		protocol int
		tokens   *guard.Tokens
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
			st, _ := svc.Status()
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
	rc := client(t, serve(t, service(t, contexts), resp.Config{Prefix: "ld-prod"}), 2, "")
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
		{[]any{"SMEMBERS", "ld-prod:big_segment_include:not base64!"}, "ERR context hash has a character outside the standard base64 alphabet"},
		{[]any{"SMEMBERS", "ld-prod:big_segments_synchronized_on"}, "ERR bigseg serves"},
		{[]any{"GET", "ld-prod:big_segments_cursor"}, "ERR bigseg serves"},
		{[]any{"SELECT", "1"}, "ERR DB index is out of range"},
		{[]any{"GET"}, "ERR wrong number of arguments for 'get' command"},
		{[]any{"HELLO", "4"}, "ERR Protocol version"},
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

// With tokens, every command but AUTH, HELLO, PING and QUIT needs AUTH first; wrong tokens
// are refused, and after three the connection is closed.
func TestTokens(t *testing.T) {
	tokens, _ := guard.NewTokens([]string{"s3cret"}, "", slog.New(slog.DiscardHandler), nil)
	addr := serve(t, service(t, contexts), resp.Config{Tokens: tokens})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange := func(cmd string) string {
		t.Helper()
		c.Write([]byte(cmd + "\r\n"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 512)
		n, _ := c.Read(b)
		return string(b[:n])
	}
	if got := exchange("GET launchdarkly:big_segments_synchronized_on"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("GET before AUTH: %q", got)
	}
	if got := exchange("PING"); got != "+PONG\r\n" {
		t.Errorf("PING before AUTH: %q", got)
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
}
