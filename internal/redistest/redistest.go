// Package redistest gives tests a real Redis: the shared server named by BIGSEG_TEST_REDIS_URL
// (with a key prefix of their own, so tests run in parallel and never touch each other's data),
// or a private redis-server process they start, stop and restart themselves.
package redistest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// DefaultURL is the shared test server when BIGSEG_TEST_REDIS_URL is unset.
const DefaultURL = "redis://127.0.0.1:6379"

// Required reports whether tests must fail, not skip, when Redis is missing
// (BIGSEG_TEST_REQUIRE_REDIS=1, as .ci/run sets).
func Required() bool { return os.Getenv("BIGSEG_TEST_REQUIRE_REDIS") == "1" }

func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (BIGSEG_TEST_REQUIRE_REDIS=1)", msg)
	}
	skips.Lock()
	skips.n++
	skips.why = msg
	skips.Unlock()
	t.Skipf("%s; set BIGSEG_TEST_REDIS_URL to a reachable Redis, or BIGSEG_TEST_REQUIRE_REDIS=1 to fail instead of skipping", msg)
}

// skips counts the tests skipped for want of Redis, and the last reason.
var skips struct {
	sync.Mutex
	n   int
	why string
}

// Main runs the tests, then says once how many skipped for want of Redis, and why. go test
// shows a passing package's output only with -v (or -json), so the line goes to standard error,
// for those and for a failing run, and to the terminal (/dev/tty) when there is one, which a
// piped run still shows.
func Main(m *testing.M) int {
	code := m.Run()
	skips.Lock()
	defer skips.Unlock()
	if skips.n > 0 {
		line := fmt.Sprintf("%s: %d tests skipped: %s (set BIGSEG_TEST_REDIS_URL, or BIGSEG_TEST_REQUIRE_REDIS=1 to fail them)\n",
			filepath.Base(os.Args[0]), skips.n, skips.why)
		os.Stderr.WriteString(line)
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			tty.WriteString(line)
			tty.Close()
		}
	}
	return code
}

// URL returns the shared test server's URL after checking that it answers.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("BIGSEG_TEST_REDIS_URL")
	if u == "" {
		u = DefaultURL
	}
	opts, err := goredis.ParseURL(u)
	if err != nil {
		t.Fatalf("BIGSEG_TEST_REDIS_URL: %v", err)
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unavailable(t, "no Redis at %s: %v", u, err)
	}
	return u
}

// Client returns a client of the shared test server, closed when the test ends.
func Client(t testing.TB) *goredis.Client {
	t.Helper()
	opts, _ := goredis.ParseURL(URL(t))
	c := goredis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// Prefix returns a key prefix no other test uses, and deletes every key under it when the
// test ends (by SCAN, never FLUSHALL: the server is shared).
func Prefix(t testing.TB, c goredis.UniversalClient) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	prefix := "bigsegtest:" + name + ":" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return prefix
}

// Server is a redis-server process of the test's own, on a free loopback port, with nothing
// kept on disk.
type Server struct {
	t    testing.TB
	Port int
	dir  string
	opts Options

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Options configure a Server beyond Start's arguments.
type Options struct {
	// Args are extra redis-server arguments, such as "--requirepass", "x".
	Args []string
	// TLS, when set, makes the server listen with TLS only (tls-port), and is the client
	// configuration the readiness check uses. The server's TLS arguments go in Args.
	TLS *tls.Config
	// Sentinel runs the server as a sentinel from the configuration file Conf.
	Sentinel bool
	// Conf is the content of a configuration file the server starts from.
	Conf string
}

// Start starts a redis-server with extra arguments (such as "--requirepass", "x"), stopped
// when the test ends.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return StartWith(t, Options{Args: args})
}

// Reserve returns a server on a free port that is not started yet: Restart starts it. For
// tests of a client that comes up before its Redis.
func Reserve(t testing.TB, args ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		unavailable(t, "redis-server is not installed")
	}
	s := &Server{t: t, Port: freeClusterPort(t), dir: t.TempDir(), opts: Options{Args: args}}
	t.Cleanup(s.Stop)
	return s
}

// StartWith starts a redis-server configured by opts, stopped when the test ends.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		unavailable(t, "redis-server is not installed")
	}
	s := &Server{t: t, Port: freeClusterPort(t), dir: t.TempDir(), opts: opts}
	if opts.Conf != "" {
		if err := os.WriteFile(filepath.Join(s.dir, "redis.conf"), []byte(opts.Conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.Stop)
	for attempt := 1; ; attempt++ {
		err := s.launch()
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatal(err)
		}
		s.Port = freeClusterPort(t) // nothing knows the port yet: take another
	}
}

// freeClusterPort returns a free port whose cluster bus port (port+10000) is free too.
func freeClusterPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		p := FreePort(t)
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatal("no free port pair")
	return 0
}

// Dir is the server's working directory.
func (s *Server) Dir() string { return s.dir }

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Client returns a client of this server, closed when the test ends.
func (s *Server) Client() *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1, TLSConfig: s.opts.TLS})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// Restart starts the server again on the same port (after Stop or Kill) and waits until it
// answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.launch(); err != nil {
		s.t.Fatal(err)
	}
}

// errPortTaken is a launch whose port (or cluster bus port) another process took between
// FreePort and redis-server's bind, on a machine that runs other tests too: the server failed
// to bind, or another answers on the port.
var errPortTaken = errors.New("redistest: the port was taken by another process")

// launch starts redis-server and waits until it answers, as itself: a server on the port
// that is not the process started (whose own bind then failed) is errPortTaken.
func (s *Server) launch() error {
	if s.cmd != nil {
		return errors.New("redistest: server already running")
	}
	var args []string
	if s.opts.Conf != "" {
		args = append(args, filepath.Join(s.dir, "redis.conf"))
	}
	if s.opts.Sentinel {
		args = append(args, "--sentinel")
	}
	if s.opts.TLS != nil {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.Port))
	} else {
		args = append(args, "--port", strconv.Itoa(s.Port))
	}
	args = append(args, "--bind", "127.0.0.1", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"))
	if !s.opts.Sentinel {
		// No persistence. A replica's first sync begins at once, not after the 5 s a master
		// waits by default for more replicas to share a diskless sync with; and a master pings
		// its replicas every second, not 10: a cluster lists a replica in CLUSTER SLOTS only
		// once its replication offset has moved, which over an empty master only a ping does.
		args = append(args, "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1")
	}
	args = append(args, s.opts.Args...)
	logFile := filepath.Join(s.dir, "redis.log")
	logged, _ := os.ReadFile(logFile) // of an earlier launch: a Restart's, a retry's
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	s.cmd = cmd
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond, TLSConfig: s.opts.TLS})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if isAuthError(err) {
			return nil // a password it was started with: INFO would need it too
		}
		if err == nil {
			return s.checkOwn(c)
		}
		if log, _ := os.ReadFile(logFile); len(log) > len(logged) && bytes.Contains(log[len(logged):], []byte("Address already in use")) {
			_ = s.cmd.Process.Kill() // its bind failed: it is exiting, if not gone
			_ = s.cmd.Wait()
			s.cmd = nil
			return fmt.Errorf("%w (port %d, or its cluster bus port)", errPortTaken, s.Port)
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server on %s did not answer: %v\n%s", s.Addr(), err, log)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not waiting for time to pass
	}
}

// checkOwn makes sure the server that answered is the process started; if not, it stops
// that process and returns errPortTaken.
func (s *Server) checkOwn(c *goredis.Client) error {
	info, err := c.Info(context.Background(), "server").Result()
	if err == nil && strings.Contains(info, "process_id:"+strconv.Itoa(s.cmd.Process.Pid)+"\r\n") {
		return nil
	}
	// Another Redis, or a server that answers PING but not INFO, such as bigseg's listener.
	_ = s.cmd.Process.Kill() // a frozen process is killed too
	_ = s.cmd.Wait()
	s.cmd = nil
	return fmt.Errorf("%w (port %d)", errPortTaken, s.Port)
}

func isAuthError(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return len(msg) >= 7 && (msg[:7] == "NOAUTH " || msg[:7] == "WRONGPA")
}

// Shutdown stops the server gracefully, saving its data to disk first, so that Restart comes
// back with the same data: an outage that loses nothing.
func (s *Server) Shutdown() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1, TLSConfig: s.opts.TLS})
	defer c.Close()
	_ = c.Do(context.Background(), "SHUTDOWN", "SAVE").Err() // the connection drops: no reply
	if err := s.cmd.Wait(); err != nil {
		s.t.Logf("redis-server exited: %v", err)
	}
	s.cmd = nil
}

// Stop kills the server (SIGKILL: an abrupt loss, as a crash or network cut looks to
// clients) and waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill() // a frozen process is killed too
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Freeze stops the server's process (SIGSTOP) without closing its connections: a server that
// hangs, as one behind a network partition looks to clients. Thaw ends it.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw lets a frozen server go on (SIGCONT).
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: signal %v to a stopped server", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// Running says whether the server was started and not stopped since.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}
