package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/redis"
)

// logs collects the server's JSON log lines and lets a test wait for one.
type logs struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	records []map[string]any
	changed chan struct{}
}

func newLogs() *logs { return &logs{changed: make(chan struct{})} }

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadBytes('\n')
		if err != nil {
			l.buf.Write(line) // incomplete: keep for the next write
			break
		}
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil {
			l.records = append(l.records, rec)
		}
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

// find returns the records with the given message.
func (l *logs) find(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, r := range l.records {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// wait returns the first record with msg, waiting up to 10s for it.
func (l *logs) wait(t testing.TB, msg string) map[string]any {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		ch := l.changed
		l.mu.Unlock()
		if recs := l.find(msg); len(recs) > 0 {
			return recs[0]
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("no %q log line in 10s; logs:\n%s", msg, l.all())
		}
	}
}

func (l *logs) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.records {
		j, _ := json.Marshal(r)
		b.Write(append(j, '\n'))
	}
	return b.String()
}

// server is a running instance of the real program.
type server struct {
	URL  string
	logs *logs
	stop func() error
}

// start runs the program with the given environment (on top of test defaults) until the
// test ends, and waits until it listens.
func start(t *testing.T, env map[string]string) *server {
	t.Helper()
	setUpMu.Lock()
	defer setUpMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	l := newLogs()
	done := make(chan error, 1)
	go func() { done <- runProgram(ctx, env, io.Discard, l) }()
	var stopOnce sync.Once
	var stopErr error
	stop := func() error {
		stopOnce.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(20 * time.Second):
				stopErr = fmt.Errorf("server did not stop in 20s")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("server stop: %v", err)
		}
	})
	deadline := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		ch := l.changed
		l.mu.Unlock()
		if recs := l.find("listening"); len(recs) > 0 {
			return &server{URL: "http://" + recs[0]["addr"].(string), logs: l, stop: stop}
		}
		select {
		case <-ch:
		case err := <-done:
			done <- err // for the cleanup's stop, which waits for it
			t.Fatalf("server exited before listening: %v\nlogs:\n%s", err, l.all())
		case <-deadline:
			t.Fatalf("server not listening after 10s; logs:\n%s", l.all())
		}
	}
}

// setUpMu lets one in-process program at a time set up, up to listening (or failing): the
// OpenTelemetry setup sets package variables of its contrib module
// (autoexport.WithFallbackMetricProducer), which two programs setting up at once race on.
// Tests that run in parallel and run the program in-process start it with start or
// runRefused, which hold it, or hold it around newApp.
var setUpMu sync.Mutex

// runRefused is runProgram serving with a configuration expected to be refused: it returns
// what run returns, having held setUpMu throughout.
func runRefused(ctx context.Context, env map[string]string) error {
	setUpMu.Lock()
	defer setUpMu.Unlock()
	return runProgram(ctx, env, io.Discard, io.Discard)
}

// emptySeedFile is the seed file of the tests' servers whose settings name no store (a server
// with none refuses to start): an empty embedded store.
const emptySeedFile = "testdata/empty.json"

// namesStore says whether env names a store, even as empty (unset).
func namesStore(env map[string]string) bool {
	for _, k := range []string{"BIGSEG_REDIS_URL", "BIGSEG_REDIS_CLUSTER_URL", "BIGSEG_REDIS_SENTINEL_URL",
		"BIGSEG_DYNAMODB_TABLE", "BIGSEG_SEED_FILE"} {
		if _, ok := env[k]; ok {
			return true
		}
	}
	return false
}

// environ is the environment a test runs the program with: env over test defaults, and
// nothing of the machine's BIGSEG_* variables, so that tests with different settings run side
// by side.
func environ(env map[string]string) func(string) string {
	// No inventory scans unless a test asks: they write their lease into the store, which
	// tests of what bigseg reads and writes count.
	defaults := map[string]string{"BIGSEG_ADDR": "127.0.0.1:0", "BIGSEG_LOG_LEVEL": "debug", "BIGSEG_SHUTDOWN_DELAY": "0s",
		"BIGSEG_INVENTORY_INTERVAL": "0s"}
	if !namesStore(env) {
		defaults["BIGSEG_SEED_FILE"] = emptySeedFile
	}
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return defaults[k]
	}
}

// configOf is the configuration the program reads from env over the test defaults (environ).
func configOf(env map[string]string) (config, error) {
	return loadConfig(environ(env))
}

// runProgram runs the program in-process: "server" with args, configured by env.
func runProgram(ctx context.Context, env map[string]string, stdout, stderr io.Writer, args ...string) error {
	return run(ctx, append([]string{"server"}, args...), environ(env), stdout, stderr)
}

func (s *server) get(t *testing.T, path string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return apitest.Do(t, nil, req)
}

func (s *server) post(t *testing.T, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return apitest.Do(t, nil, req)
}

type lookup struct {
	ContextKey  string          `json:"contextKey"`
	ContextHash string          `json:"contextHash"`
	Memberships map[string]bool `json:"memberships"`
	Status      string          `json:"status"`
	Error       string          `json:"error"`
}

func TestEmbeddedStore(t *testing.T) {
	t.Parallel()
	srv := start(t, map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json"})
	if w := srv.logs.find("using the embedded store: it is a fixed snapshot for trying bigseg out, not for production; set BIGSEG_REDIS_URL"); len(w) != 1 || w[0]["level"] != "WARN" {
		t.Errorf("no start-up warning about the embedded store; logs:\n%s", srv.logs.all())
	}
	resp, body := srv.get(t, "/memberships/alice")
	got := apitest.Decode[lookup](t, body)
	want := map[string]bool{"beta-users.g3": true, "early-access.g2": true, "blocked-accounts.g1": false}
	if resp.StatusCode != 200 || got.Status != "HEALTHY" || !reflect.DeepEqual(got.Memberships, want) {
		t.Errorf("alice: %d %s", resp.StatusCode, body)
	}
	resp, body = srv.get(t, "/memberships/"+url.PathEscape("org/acme:user 42"))
	if got := apitest.Decode[lookup](t, body); resp.StatusCode != 200 || got.ContextKey != "org/acme:user 42" || !got.Memberships["enterprise-customers.g7"] {
		t.Errorf("org/acme:user 42: %d %s", resp.StatusCode, body)
	}
	resp, body = srv.get(t, "/memberships?contextHash="+url.QueryEscape(segments.Hash("dave")))
	if got := apitest.Decode[lookup](t, body); resp.StatusCode != 200 || !got.Memberships["vip-accounts.g2"] {
		t.Errorf("dave by hash: %d %s", resp.StatusCode, body)
	}
}

// seedRedis writes memberships by key under prefix.
func seedRedis(t *testing.T, c goredis.UniversalClient, prefix string, byKey map[string][2][]string, synced time.Time) {
	t.Helper()
	ctx := context.Background()
	store := redis.New(nil, prefix)
	for k, refs := range byKey {
		h := segments.Hash(k)
		for _, r := range refs[0] {
			c.SAdd(ctx, store.IncludeKey(h), r)
		}
		for _, r := range refs[1] {
			c.SAdd(ctx, store.ExcludeKey(h), r)
		}
	}
	if !synced.IsZero() {
		c.Set(ctx, synchronizedOnKey(prefix), strconv.FormatInt(synced.UnixMilli(), 10), 0)
	}
}

func TestRedisLookups(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	keys := []string{"alice", "a/b", "100%", "a+b", "with space", "zoë", "%2F", "日本語"}
	data := map[string][2][]string{}
	for i, k := range keys {
		data[k] = [2][]string{{"inc-" + strconv.Itoa(i) + ".g1"}, {"exc.g1", "inc-" + strconv.Itoa(i) + ".g1"}}
	}
	seedRedis(t, c, prefix, data, time.Now())
	srv := start(t, map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": prefix})

	for i, k := range keys {
		resp, body := srv.get(t, "/memberships/"+url.PathEscape(k))
		got := apitest.Decode[lookup](t, body)
		want := lookup{ContextKey: k, ContextHash: segments.Hash(k), Status: "HEALTHY",
			Memberships: map[string]bool{"inc-" + strconv.Itoa(i) + ".g1": true, "exc.g1": false}}
		if resp.StatusCode != 200 || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %d %s", k, resp.StatusCode, body)
		}
	}

	body, _ := json.Marshal(map[string][]string{"contextKeys": append(keys, "nobody")})
	resp, b := srv.post(t, "/memberships", string(body))
	results := apitest.Decode[struct{ Results []lookup }](t, b).Results
	if resp.StatusCode != 200 || len(results) != len(keys)+1 {
		t.Fatalf("batch: %d %s", resp.StatusCode, b)
	}
	for i, k := range append(keys, "nobody") {
		if results[i].ContextKey != k || results[i].ContextHash != segments.Hash(k) {
			t.Errorf("result %d is for %q, want %q", i, results[i].ContextKey, k)
		}
	}
	if len(results[len(keys)].Memberships) != 0 || results[len(keys)].Status != "HEALTHY" {
		t.Errorf("nobody: %+v", results[len(keys)])
	}
}

// commandCalls returns INFO commandstats calls by command name.
func commandCalls(t *testing.T, c *goredis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		calls[name] = n
	}
	return calls
}

// TestBatchReadsOnlyWhatItMust counts, on a Redis of the test's own, the commands a batch of
// uncached contexts costs: two SMEMBERS per distinct context and nothing else. (That they go
// in one pipeline is checked by storage/redis's round-trip test.)
func TestBatchReadsOnlyWhatItMust(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := rs.Client()
	c.Set(context.Background(), "launchdarkly:big_segments_synchronized_on", strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
	srv := start(t, map[string]string{"BIGSEG_REDIS_URL": rs.URL(), "BIGSEG_STATUS_POLL_INTERVAL": "1h"})
	srv.get(t, "/memberships/warm-up") // first poll and connection set-up

	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i%50) // 50 distinct, each twice
	}
	body, _ := json.Marshal(map[string][]string{"contextKeys": keys})
	before := commandCalls(t, c)
	resp, b := srv.post(t, "/memberships", string(body))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	after := commandCalls(t, c)
	after["info"]-- // our own INFO
	// The poller's first poll may still come after the warm-up's inline one: a poll is one
	// EXISTS, and a STRLEN and a GETRANGE of each metadata key. It is no part of the batch.
	polls := after["exists"] - before["exists"]
	poll := map[string]int{"exists": 1, "strlen": 2, "getrange": 2}
	for name, n := range after {
		if d := n - before[name]; name == "smembers" && d != 100 || name != "smembers" && d != polls*poll[name] {
			t.Errorf("%s: %d calls for the batch, want %d", name, d, map[bool]int{true: 100}[name == "smembers"])
		}
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	seed := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(seed, []byte("{\n  \"contexts\": {\n    \"alice\": {\"included\": [1]}\n  }\n}\n"), 0o600)
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BIGSEG_CACHE_TTL": "5"}, `BIGSEG_CACHE_TTL="5": not a valid time.Duration`},
		{map[string]string{"BIGSEG_REDIS_URL": "127.0.0.1:6379"}, `"127.0.0.1:6379" is not a URL: give redis://127.0.0.1:6379`},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://bigseg:hunter2@127.0.0.1:6379/x"}, `BIGSEG_REDIS_URL: `},
		{map[string]string{"BIGSEG_CACHE_SIZE": "many"}, `BIGSEG_CACHE_SIZE="many"`},
		{map[string]string{"BIGSEG_CACHE_SIZE": "-1"}, "BIGSEG_CACHE_SIZE: must not be negative"},
		{map[string]string{"BIGSEG_STALE_AFTER": "0s"}, "BIGSEG_STALE_AFTER: must be positive"},
		{map[string]string{"BIGSEG_STATUS_POLL_INTERVAL": "-1s"}, "BIGSEG_STATUS_POLL_INTERVAL: must be positive"},
		{map[string]string{"BIGSEG_MAX_BATCH": "0"}, "BIGSEG_MAX_BATCH: must be positive"},
		{map[string]string{"BIGSEG_MAX_KEY_BYTES": "0"}, "BIGSEG_MAX_KEY_BYTES: must be positive"},
		{map[string]string{"BIGSEG_LOG_LEVEL": "loud"}, "BIGSEG_LOG_LEVEL"},
		{map[string]string{"BIGSEG_REDIS_URL": "http://user:hunter2@host"}, "BIGSEG_REDIS_URL"},
		{map[string]string{"BIGSEG_SEED_FILE": "/does/not/exist.json"}, "BIGSEG_SEED_FILE"},
		{map[string]string{"BIGSEG_SEED_FILE": seed}, "bad.json:3: contexts[\"alice\"]"},
		{map[string]string{"BIGSEG_ADDR": "256.0.0.1:bad"}, "listen"},
		{map[string]string{"BIGSEG_INVENTORY_MAX_SEGMENTS": "10001"}, "BIGSEG_INVENTORY_MAX_SEGMENTS: must be 0 to 10000"},
		// Files named by mistake: refused at once, not read without end.
		{map[string]string{"BIGSEG_API_TOKENS_FILE": "/dev/zero"}, "larger than 1048576 bytes"},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://127.0.0.1:1", "BIGSEG_REDIS_PASSWORD_FILE": "/dev/zero"}, "larger than 1048576 bytes"},
		{map[string]string{"BIGSEG_TLS_CERT_FILE": "/dev/zero", "BIGSEG_TLS_KEY_FILE": "/dev/zero"}, "larger than 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.env), func(t *testing.T) {
			err := runRefused(context.Background(), tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run = %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("password in error: %v", err)
			}
		})
	}
}

// TestUnknownVariables: a BIGSEG_* variable that names no setting stops the start with the
// nearest setting's name, but for the tests' own and Kubernetes' service links.
func TestUnknownVariables(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"BIGSEG_REDIS_ULR": "BIGSEG_REDIS_ULR names no setting: did you mean BIGSEG_REDIS_URL?",
		"BIGSEG_CACHESIZE": "did you mean BIGSEG_CACHE_SIZE?",
		"BIGSEG_TOKENS":    "did you mean BIGSEG_API_TOKENS?",
	} {
		if err := unknownVariables([]string{env + "=redis://127.0.0.1:6379"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", env, err, want)
		}
	}
	for _, env := range []string{"BIGSEG_SERVICE_HOST", "BIGSEG_SERVICE_PORT", "BIGSEG_SERVICE_PORT_HTTP", "BIGSEG_PORT",
		"BIGSEG_PORT_8080_TCP", "BIGSEG_PORT_8080_TCP_ADDR", "BIGSEG_REDIS_PORT_6379_TCP_PROTO", "BIGSEG_TEST_ANYTHING"} {
		if err := unknownVariables([]string{env + "=10.0.0.1"}); err != nil {
			t.Errorf("%s: %v, want it left alone", env, err)
		}
	}
	// main refuses them, but for -h; an empty one counts as unset.
	if code, _, stderr := runToExit(t, map[string]string{"BIGSEG_CACHESIZE": "1", "BIGSEG_SEED_FILE": emptySeedFile}); code != 1 || !strings.Contains(stderr, "did you mean BIGSEG_CACHE_SIZE?") {
		t.Errorf("a misspelt setting: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runToExit(t, map[string]string{"BIGSEG_CACHESIZE": "1"}, "-h"); code != 0 {
		t.Errorf("-h with a misspelt setting: exit %d, %s", code, stderr)
	}
}

func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := runProgram(context.Background(), nil, &out, io.Discard, "-h"); err != nil {
		t.Fatal(err)
	}
	typ, defaults := reflect.TypeFor[config](), reflect.ValueOf(defaultConfig())
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Tag.Get("ignored") == "true" {
			continue // derived, no setting
		}
		line := ""
		for l := range strings.Lines(out.String()) {
			if strings.HasPrefix(l, "BIGSEG_"+f.Tag.Get("envconfig")+" ") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("BIGSEG_%s not listed", f.Tag.Get("envconfig"))
			continue
		}
		if d := fmt.Sprint(defaults.Field(i).Interface()); d != "" && d != "[]" && !strings.Contains(line, " "+d+" ") {
			t.Errorf("BIGSEG_%s listed without its default %q: %s", f.Tag.Get("envconfig"), d, line)
		}
	}
	if err := runProgram(context.Background(), nil, io.Discard, io.Discard, "bogus"); err == nil {
		t.Error("unknown command accepted")
	}
}

// synchronizedOnKey and cursorKey are the metadata keys under prefix.
func synchronizedOnKey(prefix string) string { k, _ := redis.MetadataKeys(prefix); return k }
func cursorKey(prefix string) string         { _, k := redis.MetadataKeys(prefix); return k }

// includeKey is the include set of key under prefix.
func includeKey(prefix, key string) string {
	return redis.New(nil, prefix).IncludeKey(segments.Hash(key))
}
