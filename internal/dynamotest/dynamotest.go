// Package dynamotest gives tests a DynamoDB: a moto_server process (moto's DynamoDB emulator)
// on a free loopback port, one per test package, started at first use and stopped by Main,
// with a table of each test's own, so tests run in parallel and never touch each other's
// data. It also writes the way the Relay Proxy does (Patch), and puts a proxy in front of the
// server that can throttle, fail, hang or rewrite calls (Proxy).
package dynamotest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Region is the region of every client of the emulator.
const Region = "us-east-1"

// Required reports whether tests must fail, not skip, when moto_server is missing:
// BIGSEG_TEST_REQUIRE_DYNAMODB=1, or BIGSEG_TEST_REQUIRE_REDIS=1 (which .ci/run sets, and
// which asks for every outside system the tests use).
func Required() bool {
	return os.Getenv("BIGSEG_TEST_REQUIRE_DYNAMODB") == "1" || os.Getenv("BIGSEG_TEST_REQUIRE_REDIS") == "1"
}

func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (BIGSEG_TEST_REQUIRE_DYNAMODB=1 or BIGSEG_TEST_REQUIRE_REDIS=1)", msg)
	}
	skips.Lock()
	skips.n++
	skips.why = msg
	skips.Unlock()
	t.Skipf("%s; put moto_server (moto[server]) on PATH, or set BIGSEG_TEST_REQUIRE_DYNAMODB=1 to fail instead of skipping", msg)
}

// skips counts the tests skipped for want of moto_server, and the last reason.
var skips struct {
	sync.Mutex
	n   int
	why string
}

// shared is the package's server, started by the first test that asks for it.
var shared struct {
	sync.Mutex
	srv *Server
	err error
}

// Main runs the tests (m is a *testing.M, or whatever runs them, such as another harness's
// Main), stops the package's server, then says once how many tests skipped for want of
// moto_server, and why: go test shows nothing of a package that passes but its "ok", so the
// line goes to the terminal (/dev/tty) when there is one, else to standard error.
func Main(m interface{ Run() int }) int {
	code := m.Run()
	shared.Lock()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	shared.Unlock()
	skips.Lock()
	defer skips.Unlock()
	if skips.n > 0 {
		w := os.Stderr
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			defer tty.Close()
			w = tty
		}
		fmt.Fprintf(w, "%s: %d tests skipped: %s (put moto_server on PATH, or set BIGSEG_TEST_REQUIRE_DYNAMODB=1 to fail them)\n",
			filepath.Base(os.Args[0]), skips.n, skips.why)
	}
	return code
}

// Shared returns the package's server, starting it at first use; Main stops it. A package
// whose tests use it calls Main from its TestMain.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = start()
	}
	if shared.err != nil {
		unavailable(t, "%v", shared.err)
	}
	return shared.srv
}

// Server is a moto_server process.
type Server struct {
	// URL is the server's endpoint, http://127.0.0.1:PORT.
	URL string

	cmd    *exec.Cmd
	exited chan struct{}
	log    *tail
}

// Start starts a moto_server of the test's own, stopped when the test ends: for a test that
// stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		unavailable(t, "%v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

var listening = regexp.MustCompile(`Running on (http://127\.0\.0\.1:[0-9]+)`)

// start starts moto_server on port 0, so that it takes a free port itself (no race with
// other processes for one chosen here), and reads the port from the line it logs.
func start() (*Server, error) {
	path, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, errors.New("moto_server is not installed")
	}
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", "0")
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	// Its own process group, killed whole (the command may be a wrapper script), and killed
	// with the test binary if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = nil
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	s := &Server{cmd: cmd, exited: make(chan struct{}), log: &tail{}}
	found := make(chan string, 1)
	go func() {
		// Drains moto's log (a line a request) until it exits, keeping the last lines.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.log.add(sc.Text())
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(s.exited)
	}()
	select {
	case s.URL = <-found:
	case <-s.exited:
		return nil, fmt.Errorf("moto_server exited before listening:\n%s", s.log)
	case <-time.After(60 * time.Second): // a bound on a hung start, not a wait for time to pass
		s.Stop()
		return nil, fmt.Errorf("moto_server did not say where it listens:\n%s", s.log)
	}
	return s, s.ready()
}

// ready waits until the server answers a DynamoDB call.
func (s *Server) ready() error {
	c, closeIdle := newClient(s.URL)
	defer closeIdle()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.ListTables(ctx, &awsdynamodb.ListTablesInput{})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("moto_server at %s does not answer: %v\n%s", s.URL, err, s.log)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not waiting for time to pass
	}
}

// Stop kills the server and waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// tail keeps the last lines of a log.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (l *tail) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 50 {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, line)
}

func (l *tail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// newClient is a client of endpoint with fake credentials, and a function that closes its
// idle connections.
func newClient(endpoint string) (*awsdynamodb.Client, func()) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	c := awsdynamodb.New(awsdynamodb.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("bigsegtest", "bigsegtest", ""),
		HTTPClient:   &http.Client{Transport: tr},
	})
	return c, tr.CloseIdleConnections
}

// Client returns a client of endpoint (the server's URL, or a Proxy's) with fake
// credentials; its connections are closed when the test ends.
func Client(t testing.TB, endpoint string) *awsdynamodb.Client {
	c, closeIdle := newClient(endpoint)
	t.Cleanup(closeIdle)
	return c
}

// Env sets the standard AWS variables of Vars for the rest of the test, so that the SDK's
// default chain (storage/dynamodb.NewClient) in this process reaches endpoint. Tests that
// call it cannot run in parallel.
func Env(t *testing.T, endpoint string) {
	for k, v := range Vars(t, endpoint) {
		t.Setenv(k, v)
	}
}

// Vars are the standard AWS variables with which the SDK's default chain reaches endpoint
// with fake credentials, and reads no profile or instance role of this machine: for a
// process a test starts, or for Env.
func Vars(t testing.TB, endpoint string) map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB":   endpoint,
		"AWS_REGION":                  Region,
		"AWS_ACCESS_KEY_ID":           "bigsegtest",
		"AWS_SECRET_ACCESS_KEY":       "bigsegtest",
		"AWS_SESSION_TOKEN":           "",
		"AWS_PROFILE":                 "",
		"AWS_MAX_ATTEMPTS":            "",
		"AWS_CONFIG_FILE":             filepath.Join(t.TempDir(), "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "credentials"),
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CA_BUNDLE":               "",
	}
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Table creates a table of LaunchDarkly's layout (partition key "namespace", sort key "key")
// that no other test uses, deleted when the test ends, and returns its name.
func Table(t testing.TB, c *awsdynamodb.Client) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	table := "bigsegtest-" + name + "-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	_, err := c.CreateTable(ctx, &awsdynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("namespace"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("namespace"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("key"), KeyType: types.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	t.Cleanup(func() { _, _ = c.DeleteTable(context.Background(), &awsdynamodb.DeleteTableInput{TableName: &table}) })
	return table
}
