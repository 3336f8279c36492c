package ldbigseg_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// This file gives the end-to-end tests real parts: the bigseg server binary, built from this
// repository and run as a process; the shared Redis (BIGSEG_TEST_REDIS_URL, by default
// 127.0.0.1:6379) under a key prefix per test; and private redis-server processes for tests
// that stop Redis. Without a Redis the tests that need one skip, unless BIGSEG_TEST_REQUIRE_REDIS=1.

// hashOf is a context key's hash, as the SDKs and bigseg compute it.
func hashOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// --- the bigseg binary ---

var server struct {
	once sync.Once
	dir  string // a temporary directory holding the binary we built, removed by TestMain
	path string
	err  error
}

// serverBinary returns the path of the bigseg server binary: BIGSEG_SERVER_BIN if set, else
// one built once per test run with "go build ./cmd/server" in the repository's root.
func serverBinary(t testing.TB) string {
	t.Helper()
	server.once.Do(func() {
		if p := os.Getenv("BIGSEG_SERVER_BIN"); p != "" {
			server.path = p
			return
		}
		root, err := repoRoot()
		if err != nil {
			server.err = err
			return
		}
		if server.dir, err = os.MkdirTemp("", "ldbigseg-server-"); err != nil {
			server.err = err
			return
		}
		server.path = filepath.Join(server.dir, "server")
		cmd := exec.Command("go", "build", "-o", server.path, "./cmd/server")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			server.err = fmt.Errorf("go build ./cmd/server in %s: %v\n%s", root, err, out)
		}
	})
	if server.err != nil {
		t.Fatal(server.err)
	}
	return server.path
}

// removeServerBinary removes the binary serverBinary built, if any.
func removeServerBinary() {
	if server.dir != "" {
		os.RemoveAll(server.dir)
	}
}

// repoRoot finds the bigseg repository from the test's directory: the nearest parent whose
// go.mod is the server's module.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && regexp.MustCompile(`(?m)^module github\.com/bigseg/bigseg\s*$`).Match(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no parent directory holds the go.mod of github.com/bigseg/bigseg")
		}
		dir = parent
	}
}

// --- bigseg processes ---

// bigsegProcess is a running bigseg server.
type bigsegProcess struct {
	URL  string // http://127.0.0.1:port
	Addr string // 127.0.0.1:port

	env  []string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and its output is read
	mu   sync.Mutex
	log  bytes.Buffer
}

// startBigseg starts bigseg with the settings (NAME=value; later ones win) on a free loopback
// port, and returns once its first status poll has completed. The process gets no other
// environment, so that no BIGSEG_* variable of the caller's leaks in.
func startBigseg(bin string, settings ...string) (*bigsegProcess, error) {
	env := append([]string{"BIGSEG_ADDR=127.0.0.1:0", "BIGSEG_SHUTDOWN_DELAY=0s", "BIGSEG_STATUS_POLL_INTERVAL=50ms"}, settings...)
	p := &bigsegProcess{env: env, done: make(chan struct{})}
	p.cmd = exec.Command(bin)
	p.cmd.Env = env
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	listening := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Bytes()
			p.mu.Lock()
			p.log.Write(line)
			p.log.WriteByte('\n')
			p.mu.Unlock()
			var l struct{ Msg, Addr string }
			if json.Unmarshal(line, &l) == nil && l.Msg == "listening" {
				listening <- l.Addr
			}
		}
		p.cmd.Wait()
	}()
	select {
	case p.Addr = <-listening:
	case <-p.done:
		return nil, fmt.Errorf("bigseg exited before listening:\n%s", p.Log())
	case <-time.After(30 * time.Second):
		p.Kill()
		return nil, fmt.Errorf("bigseg did not listen within 30s:\n%s", p.Log())
	}
	p.URL = "http://" + p.Addr
	if err := p.waitFirstPoll(); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// mustStartBigseg starts bigseg for a test, stops it when the test ends, and shows its log if
// the test failed.
func mustStartBigseg(t *testing.T, settings ...string) *bigsegProcess {
	t.Helper()
	p, err := startBigseg(serverBinary(t), settings...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("bigseg %s log:\n%s", p.Addr, p.Log())
		}
	})
	return p
}

// Restart starts the process again with the same settings on the same address, as a restarted
// instance behind the same name would be.
func (p *bigsegProcess) Restart(t *testing.T) *bigsegProcess {
	t.Helper()
	return mustStartBigseg(t, append(p.env, "BIGSEG_ADDR="+p.Addr)...)
}

// Log is what the process wrote to stderr so far.
func (p *bigsegProcess) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Stop sends SIGTERM and waits for the process to exit (killing it after 15 s).
func (p *bigsegProcess) Stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.Kill()
	}
}

// Kill kills the process, as a crash would, and waits for it to be gone.
func (p *bigsegProcess) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// statusBody is the part of GET /status the tests look at.
type statusBody struct {
	Available          bool    `json:"available"`
	LastSynchronizedOn int64   `json:"lastSynchronizedOn"`
	CheckedAt          *string `json:"checkedAt"`
	// Environments is each environment's status, by name: the unscoped /status of a bigseg
	// serving several (BIGSEG_ENVIRONMENTS), which has none of the fields above.
	Environments map[string]statusBody `json:"environments"`
}

// Status reads GET /status.
func (p *bigsegProcess) Status() (statusBody, error) { return p.statusAt("/status") }

func (p *bigsegProcess) statusAt(path string) (statusBody, error) {
	var st statusBody
	resp, err := http.Get(p.URL + path)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// waitFirstPoll waits until the status of every environment served has been polled once.
func (p *bigsegProcess) waitFirstPoll() error {
	return p.WaitStatus("its first status poll", func(st statusBody) bool {
		if len(st.Environments) == 0 {
			return st.CheckedAt != nil
		}
		for _, env := range st.Environments {
			if env.CheckedAt == nil {
				return false
			}
		}
		return true
	})
}

// WaitStatus polls GET /status until cond holds, or fails after 15 s.
func (p *bigsegProcess) WaitStatus(what string, cond func(statusBody) bool) error {
	return p.waitStatusAt("/status", what, cond)
}

// WaitEnvironmentStatus polls GET /environments/{env}/status until cond holds, or fails after
// 15 s.
func (p *bigsegProcess) WaitEnvironmentStatus(env, what string, cond func(statusBody) bool) error {
	return p.waitStatusAt("/environments/"+env+"/status", what, cond)
}

func (p *bigsegProcess) waitStatusAt(path, what string, cond func(statusBody) bool) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := p.statusAt(path)
		if err == nil && cond(st) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bigseg %s: no %s on %s within 15s (last status %+v, error %v)", p.Addr, what, path, st, err)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// --- Redis ---

// sharedRedis returns a client of the shared test Redis, closed when the test ends, and its
// URL. It skips the test (fails it with BIGSEG_TEST_REQUIRE_REDIS=1) if none answers.
func sharedRedis(t *testing.T) (*goredis.Client, string) {
	t.Helper()
	u := os.Getenv("BIGSEG_TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379"
	}
	opts, err := goredis.ParseURL(u)
	if err != nil {
		t.Fatalf("BIGSEG_TEST_REDIS_URL: %v", err)
	}
	c := goredis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("BIGSEG_TEST_REQUIRE_REDIS") == "1" {
			t.Fatalf("no Redis at %s: %v (BIGSEG_TEST_REQUIRE_REDIS=1)", u, err)
		}
		t.Skipf("no Redis at %s: %v; set BIGSEG_TEST_REDIS_URL, or BIGSEG_TEST_REQUIRE_REDIS=1 to fail instead", u, err)
	}
	return c, u
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// testPrefix returns a key prefix no other test uses, and deletes its keys when the test ends.
func testPrefix(t *testing.T, c *goredis.Client) string {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	prefix := "ldbigseg_" + name + "_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		if err := (ldLayout{c, prefix}).Clear(context.Background()); err != nil {
			t.Errorf("deleting the test's keys: %v", err)
		}
	})
	return prefix
}

// ldLayout writes Big Segments data in LaunchDarkly's Redis layout under a prefix, as a
// synchronizer (the Relay Proxy) does.
type ldLayout struct {
	c      goredis.UniversalClient
	prefix string
}

// SetSynchronizedOn writes big_segments_synchronized_on (unix milliseconds).
func (l ldLayout) SetSynchronizedOn(ctx context.Context, ms int64) error {
	return l.c.Set(ctx, l.prefix+":big_segments_synchronized_on", strconv.FormatInt(ms, 10), 0).Err()
}

// SetSynchronizedNow marks the data as synchronized now.
func (l ldLayout) SetSynchronizedNow(ctx context.Context) error {
	return l.SetSynchronizedOn(ctx, time.Now().UnixMilli())
}

// SetMembership adds segment refs to a context hash's include and exclude sets.
func (l ldLayout) SetMembership(ctx context.Context, hash string, included, excluded []string) error {
	pipe := l.c.Pipeline()
	for _, ref := range included {
		pipe.SAdd(ctx, l.prefix+":big_segment_include:"+hash, ref)
	}
	for _, ref := range excluded {
		pipe.SAdd(ctx, l.prefix+":big_segment_exclude:"+hash, ref)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// Clear deletes every key under the prefix.
func (l ldLayout) Clear(ctx context.Context) error {
	iter := l.c.Scan(ctx, 0, l.prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) == 0 {
		return err
	}
	return l.c.Del(ctx, keys...).Err()
}

// redisServer is a private redis-server process that a test can stop and start again on the
// same port.
type redisServer struct {
	Port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts a private redis-server on a free loopback port, stopped when the test ends.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("BIGSEG_TEST_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not installed (BIGSEG_TEST_REQUIRE_REDIS=1)")
		}
		t.Skip("redis-server is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &redisServer{Port: l.Addr().(*net.TCPAddr).Port, dir: t.TempDir()}
	l.Close()
	r.Start(t)
	t.Cleanup(r.Stop)
	return r
}

// URL is the server's redis:// URL.
func (r *redisServer) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d", r.Port) }

// Start starts the server (again) and waits until it answers PING.
func (r *redisServer) Start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--logfile", filepath.Join(r.dir, "redis.log"))
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(r.cmd, r.done)
	c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.Port), MaxRetries: -1})
	defer c.Close()
	waitFor(t, "redis-server to answer PING", func() bool {
		return c.Ping(context.Background()).Err() == nil
	})
}

// Stop stops the server (SIGTERM, without saving: it was started with --save "") and waits
// for it to exit. Its data is gone.
func (r *redisServer) Stop() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd = nil
}

// Client returns a client of the server, closed when the test ends.
func (r *redisServer) Client(t *testing.T) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.Port)})
	t.Cleanup(func() { c.Close() })
	return c
}
