package main

import (
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
}
