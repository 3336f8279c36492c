package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bigseg/bigseg/segments"
)

// lookupWith is the status code of a lookup with the given Authorization header values.
func lookupWith(t *testing.T, base string, auth ...string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/memberships/alice", nil)
	req.Header["Authorization"] = auth
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestTokensFileRotation rotates BIGSEG_API_TOKENS_FILE under the real binary the ways
// operators do: a Kubernetes Secret's symlink swap (seen within a second), an in-place rewrite
// followed by SIGHUP, and a file that does not load (the last good tokens stay in force, and
// a metric says so). Revoked tokens get 401 from then on.
func TestTokensFileRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		os.Mkdir(filepath.Join(dir, v), 0o700)
	}
	writeFile(t, dir+"/v1/tokens", "old-token\n")
	writeFile(t, dir+"/v2/tokens", "new-token\n")
	os.Symlink("v1", dir+"/..data")
	os.Symlink("..data/tokens", dir+"/tokens")
	p := startProcess(t, map[string]string{"BIGSEG_API_TOKENS_FILE": dir + "/tokens", "BIGSEG_SEED_FILE": "../../examples/memberships.json"})
	if got := lookupWith(t, p.URL, "Bearer old-token"); got != 200 {
		t.Fatalf("the token at start: %d", got)
	}
	if got := lookupWith(t, p.URL, "Bearer old-token", "Bearer nope"); got != 400 {
		t.Errorf("two Authorization headers: %d, want 400", got)
	}

	os.Symlink("v2", dir+"/..data.tmp")
	os.Rename(dir+"/..data.tmp", dir+"/..data")
	waitFor(t, "the swapped Secret in force", func() bool { return lookupWith(t, p.URL, "Bearer new-token") == 200 })
	if got := lookupWith(t, p.URL, "Bearer old-token"); got != 401 {
		t.Errorf("the revoked token after the swap: %d, want 401", got)
	}

	writeFile(t, dir+"/v2/tokens", "newer-token\n")
	p.signal(t, syscall.SIGHUP)
	waitFor(t, "the reload on SIGHUP", func() bool { return len(p.logs.find("API tokens reloaded")) == 2 })
	if a, b := lookupWith(t, p.URL, "Bearer newer-token"), lookupWith(t, p.URL, "Bearer new-token"); a != 200 || b != 401 {
		t.Errorf("after a rewrite and SIGHUP: new %d, revoked %d; want 200, 401", a, b)
	}

	writeFile(t, dir+"/v2/tokens", "# emptied\n")
	p.signal(t, syscall.SIGHUP)
	// A rewrite in place is not atomic: a look between its truncation and its write may have
	// seen an empty file already, so the state is waited for, not the log line.
	waitFor(t, "bigseg_api_tokens_reload_failing at 1", func() bool { return scrapeValue(t, p.URL, "bigseg_api_tokens_reload_failing") == 1 })
	if p.logs.find("API tokens file changed but does not load; the last good tokens stay in force") == nil {
		t.Error("a file that does not load was not logged")
	}
	if got := lookupWith(t, p.URL, "Bearer newer-token"); got != 200 {
		t.Errorf("the last good token while the file has none: %d, want 200", got)
	}

	// Removed and put back unchanged, twice: each time back, the failure is over; each
	// removal is a failure of its own, logged.
	writeFile(t, dir+"/v2/tokens", "newer-token\n")
	p.signal(t, syscall.SIGHUP)
	failing := func(want float64) func() bool {
		return func() bool { return scrapeValue(t, p.URL, "bigseg_api_tokens_reload_failing") == want }
	}
	waitFor(t, "bigseg_api_tokens_reload_failing at 0 once fixed", failing(0))
	for i := range 2 {
		os.Rename(dir+"/v2/tokens", dir+"/v2/aside")
		p.signal(t, syscall.SIGHUP)
		waitFor(t, fmt.Sprintf("bigseg_api_tokens_reload_failing at 1 once removed (%d)", i+1), failing(1))
		os.Rename(dir+"/v2/aside", dir+"/v2/tokens")
		p.signal(t, syscall.SIGHUP)
		waitFor(t, fmt.Sprintf("bigseg_api_tokens_reload_failing at 0 once put back (%d)", i+1), failing(0))
	}
	if n := len(p.logs.find("API tokens file changed but does not load; the last good tokens stay in force")); n != 3 {
		t.Errorf("the emptied file and two removals logged %d times, want 3", n)
	}
}

// TestRevokedTokenEndsHeldRESPConnections revokes, under the real binary, the token of a
// Redis-protocol connection that is already signed in (an SDK's pooled connection): its next
// command is refused and the connection closed, so that no held connection outlives its token.
func TestRevokedTokenEndsHeldRESPConnections(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, file, "old-token\n")
	p := startProcess(t, withRESP(map[string]string{"BIGSEG_API_TOKENS_FILE": file, "BIGSEG_SEED_FILE": "../../examples/memberships.json"}))
	conn, err := net.Dial("tcp", respAddr(t, p.logs))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	send := func(args ...string) string {
		t.Helper()
		fmt.Fprintf(conn, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(conn, "$%d\r\n%s\r\n", len(a), a)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.HasPrefix(line, "*") { // the members of a set: read on
			n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
			for range 2 * n {
				br.ReadString('\n')
			}
		}
		return strings.TrimSpace(line)
	}
	include := "launchdarkly:big_segment_include:" + segments.Hash("alice")
	if got := send("AUTH", "old-token"); got != "+OK" {
		t.Fatalf("AUTH with the token: %q", got)
	}
	if got := send("SMEMBERS", include); got != "*2" {
		t.Fatalf("SMEMBERS signed in: %q, want alice's two refs", got)
	}

	writeFile(t, file, "new-token\n")
	p.signal(t, syscall.SIGHUP)
	p.logs.wait(t, "API tokens reloaded")
	if got := send("SMEMBERS", include); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("SMEMBERS once the token is revoked: %q, want NOAUTH", got)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the connection of a revoked token: %v, want it closed (EOF)", err)
	}
	if got := respRaw(t, respAddr(t, p.logs), []string{"AUTH", "old-token"}, []string{"AUTH", "new-token"}, []string{"SMEMBERS", include}); !slices.Equal(got,
		[]string{"-WRONGPASS invalid username-password pair or user is disabled.\r\n", "+OK\r\n", "*2\r\n"}) {
		t.Errorf("a new connection: %q", got)
	}
}
