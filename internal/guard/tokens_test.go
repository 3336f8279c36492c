package guard_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bigseg/bigseg/internal/guard"
)

// failings records what a reloader reported.
type failings struct {
	mu  sync.Mutex
	got []bool
}

func (f *failings) observe(failing bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, failing)
}

func (f *failings) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var words []string
	for _, v := range f.got {
		words = append(words, map[bool]string{true: "failing", false: "ok"}[v])
	}
	return strings.Join(words, " ")
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTokensList(t *testing.T) {
	tok, err := guard.NewTokens([]string{" a ", "b", ""}, "", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token string
		want  bool
	}{{"a", true}, {"b", true}, {"", false}, {"c", false}, {"a ", false}, {"ab", false}} {
		if got := tok.Valid(c.token); got != c.want {
			t.Errorf("Valid(%q) = %v, want %v", c.token, got, c.want)
		}
	}
	if !tok.Enabled() {
		t.Error("not enabled with tokens")
	}
	open, _ := guard.NewTokens(nil, "", slog.New(slog.DiscardHandler), nil)
	if open.Enabled() || open.Valid("") {
		t.Error("no tokens: enabled, or the empty token valid")
	}
}

func TestTokensFileErrorsAtStart(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/empty", "# nothing\n\n")
	for _, c := range []struct{ file, want string }{
		{dir + "/missing", "no such file"},
		{dir + "/empty", "no token in it"},
	} {
		if _, err := guard.NewTokens(nil, c.file, slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.file, err, c.want)
		}
	}
}

// TestTokensFileRotation rotates the file the ways operators do (rewritten in place, a
// Kubernetes Secret's symlink swapped, a file that does not load meanwhile): each takes effect
// once Run has looked, a check interval later, or at once on Reload, and a file that does not
// load keeps the last good tokens, said once.
func TestTokensFileRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		// A Kubernetes Secret volume: the file is a symlink through ..data to a directory
		// that the kubelet replaces whole.
		for _, v := range []string{"v1", "v2"} {
			os.Mkdir(filepath.Join(dir, v), 0o700)
		}
		write(t, dir+"/v1/tokens", "# callers\nold-a\nold-b\n")
		write(t, dir+"/v2/tokens", "new-a\n")
		os.Symlink("v1", dir+"/..data")
		os.Symlink("..data/tokens", dir+"/tokens")
		var logs bytes.Buffer
		var fails failings
		tok, err := guard.NewTokens(nil, dir+"/tokens", slog.New(slog.NewTextHandler(&logs, nil)), fails.observe)
		if err != nil {
			t.Fatal(err)
		}
		runInBackground(t, tok.Run)
		// tick lets a check interval pass, and Run look at the file.
		tick := func() {
			time.Sleep(guard.FileCheckInterval)
			synctest.Wait()
		}
		expect := func(step string, valid, invalid string) {
			t.Helper()
			for _, v := range strings.Fields(valid) {
				if !tok.Valid(v) {
					t.Errorf("%s: %q refused", step, v)
				}
			}
			for _, v := range strings.Fields(invalid) {
				if tok.Valid(v) {
					t.Errorf("%s: %q accepted", step, v)
				}
			}
		}
		expect("at start", "old-a old-b", "new-a")

		// The symlink swap: seen once the check interval has passed.
		os.Symlink("v2", dir+"/..data.tmp")
		os.Rename(dir+"/..data.tmp", dir+"/..data")
		expect("right after the swap", "old-a", "")
		tick()
		expect("after the swap", "new-a", "old-a old-b")

		// Rewritten in place, revoking new-a: Reload sees it at once.
		write(t, dir+"/v2/tokens", "newer\n")
		tok.Reload()
		expect("after the rewrite and Reload", "newer", "new-a")

		// A file that does not load: the last good tokens stay, said once however often looked at.
		write(t, dir+"/v2/tokens", "# emptied by mistake\n")
		for range 3 {
			tick()
			expect("while the file has no token", "newer", "")
		}
		os.Remove(dir + "/v2/tokens")
		tok.Reload()
		tok.Reload()
		expect("while the file is missing", "newer", "")
		if n := strings.Count(logs.String(), "does not load"); n != 1 {
			t.Errorf("a file that does not load was logged %d times, want once:\n%s", n, logs.String())
		}
		for range 3 {
			tick()
		}
		write(t, dir+"/v2/tokens", "fixed\n")
		tick()
		expect("once fixed", "fixed", "newer")
		// At start, the swap, the rewrite, no token (one failure), missing (another read error,
		// counted once), fixed.
		if got, want := fails.String(), "ok ok ok failing failing ok"; got != want {
			t.Errorf("observed %q, want %q", got, want)
		}
		if strings.Contains(logs.String(), "old-a") || strings.Contains(logs.String(), "newer") {
			t.Errorf("a token was logged:\n%s", logs.String())
		}
	})
}

// TestTokensNotReadByRequests: requests only use the tokens last read; without Run, a file
// rewritten is not seen however long one waits, until Reload. So no request ever reads the
// file, or waits for one that does.
func TestTokensNotReadByRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := t.TempDir() + "/tokens"
		write(t, file, "old\n")
		tok, err := guard.NewTokens(nil, file, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		session := tok.Session("old")
		write(t, file, "new\n")
		time.Sleep(10 * guard.FileCheckInterval)
		if !tok.Valid("old") || tok.Valid("new") || session.Scope() == nil {
			t.Error("a request, or a session, read the file")
		}
		tok.Reload()
		if tok.Valid("old") || !tok.Valid("new") || session.Scope() != nil {
			t.Error("Reload did not take the file's tokens")
		}
	})
}

func TestRequire(t *testing.T) {
	tok, _ := guard.NewTokens([]string{"secret"}, "", slog.New(slog.DiscardHandler), nil)
	refuse := func(w http.ResponseWriter, r *http.Request, code int, msg string) { http.Error(w, msg, code) }
	h := tok.Require(refuse, func(*http.Request) string { return "" })(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, c := range []struct {
		name   string
		values []string
		want   int
	}{
		{"none", nil, 401},
		{"good", []string{"Bearer secret"}, 200},
		{"scheme in another case, spaces", []string{"bearer   secret "}, 200},
		{"wrong", []string{"Bearer nope"}, 401},
		{"another scheme", []string{"Basic secret"}, 401},
		{"no scheme", []string{"secret"}, 401},
		{"good then bad", []string{"Bearer secret", "Bearer nope"}, 400},
		{"bad then good", []string{"Bearer nope", "Bearer secret"}, 400},
		{"good twice", []string{"Bearer secret", "Bearer secret"}, 400},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header["Authorization"] = c.values
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, rec.Code, c.want)
		}
		if rec.Code == 401 && rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", c.name)
		}
	}
}

// TestTokenScopes: a token of the file may open some environments only: refused (403) on the
// others and on requests about every environment; a token without a scope, or of the list,
// opens every one. A scope naming an environment not served is an error at start.
func TestTokenScopes(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/tokens", "tok-all\ntok-staging staging\ntok-two staging,qa\n")
	tok, err := guard.NewTokens(nil, dir+"/tokens", slog.New(slog.DiscardHandler), nil, "production", "staging", "qa")
	if err != nil {
		t.Fatal(err)
	}
	refuse := func(w http.ResponseWriter, r *http.Request, code int, msg string) { http.Error(w, msg, code) }
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, c := range []struct {
		token, env string
		want       int
	}{
		{"tok-all", "production", 200}, {"tok-all", "", 200},
		{"tok-staging", "staging", 200}, {"tok-staging", "production", 403}, {"tok-staging", "", 403},
		{"tok-two", "qa", 200}, {"tok-two", "production", 403},
		{"nope", "staging", 401},
	} {
		h := tok.Require(refuse, func(*http.Request) string { return c.env })(ok)
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s on %q: %d, want %d", c.token, c.env, rec.Code, c.want)
		}
	}
	list, _ := guard.NewTokens([]string{"listed"}, "", slog.New(slog.DiscardHandler), nil, "production")
	if !list.Opens("listed", "production") || !list.Opens("listed", "") {
		t.Error("a token of BIGSEG_API_TOKENS does not open every environment")
	}
	write(t, dir+"/bad", "tok-x prod\n")
	if _, err := guard.NewTokens(nil, dir+"/bad", slog.New(slog.DiscardHandler), nil, "production"); err == nil ||
		!strings.Contains(err.Error(), `BIGSEG_API_TOKENS_FILE:1: the token's environments name one that is not served (production)`) ||
		strings.Contains(err.Error(), "tok-x") {
		t.Errorf("a scope naming no environment: %v", err)
	}
	// What stands where the environments should may be a secret too (a label and its token, or
	// two tokens, on one line): never repeated; nor is a token given twice.
	for _, c := range []struct{ file, want string }{
		{"platform-team s3cret-token-9f86d0818\n", "BIGSEG_API_TOKENS_FILE:1: the token's environments name one that is not served"},
		{"tok-a production\n# widened\ntok-a staging\n", "BIGSEG_API_TOKENS_FILE:3: the token of line 1 again"},
	} {
		write(t, dir+"/bad", c.file)
		_, err := guard.NewTokens(nil, dir+"/bad", slog.New(slog.DiscardHandler), nil, "production", "staging")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "tok-a") {
			t.Errorf("%q: %v, want %q and no token", c.file, err, c.want)
		}
	}
	// A byte order mark before the first token is not part of it.
	write(t, dir+"/bom", "\uFEFFtok-bom\n")
	if bom, err := guard.NewTokens(nil, dir+"/bom", slog.New(slog.DiscardHandler), nil, "production"); err != nil || !bom.Valid("tok-bom") {
		t.Errorf("a file with a byte order mark: %v", err)
	}
}

// TestSessionFollowsReloads: a session (a connection's AUTH) opens what its token opens as the
// file is now: a token rescoped opens its new environments only, a token revoked nothing, and
// a token given back opens again.
func TestSessionFollowsReloads(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/tokens", "tok-a\ntok-b staging\n")
	tok, err := guard.NewTokens(nil, dir+"/tokens", slog.New(slog.DiscardHandler), nil, "production", "staging")
	if err != nil {
		t.Fatal(err)
	}
	a, b := tok.Session("tok-a"), tok.Session("tok-b")
	if tok.Session("nope") != nil || a == nil || b == nil {
		t.Fatal("sessions of a wrong token, or none of good ones")
	}
	if !a.Scope().Opens("production") || b.Scope().Opens("production") || !b.Scope().Opens("staging") {
		t.Fatal("the scopes at start")
	}
	write(t, dir+"/tokens", "tok-b production\n")
	tok.Reload()
	if a.Scope() != nil {
		t.Error("a revoked token's session still opens something")
	}
	if !b.Scope().Opens("production") || b.Scope().Opens("staging") {
		t.Error("a rescoped token's session keeps its old scope")
	}
	write(t, dir+"/tokens", "tok-a\ntok-b production\n")
	tok.Reload()
	if !a.Scope().Opens("staging") {
		t.Error("a token given back does not open again")
	}
	var none *guard.Session
	if none.Scope().Opens("production") {
		t.Error("a nil session opens something")
	}
}

// TestRefusedTokensLogged: refused tokens are logged, the first at once, then one line per
// FailureLogInterval that counts them; short tokens are said at start; no token is logged.
func TestRefusedTokensLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		tok, _ := guard.NewTokens([]string{"short", strings.Repeat("k", guard.MinTokenLength)}, "", slog.New(slog.NewTextHandler(&logs, nil)), nil)
		if !strings.Contains(logs.String(), "short=1") {
			t.Errorf("one short token, not said:\n%s", logs.String())
		}
		for range 100 {
			tok.Valid("wrong-xyzzy")
		}
		if n := strings.Count(logs.String(), "API tokens refused"); n != 1 || !strings.Contains(logs.String(), "refused=1") {
			t.Errorf("after 100 refusals in a moment, %d lines, want 1 counting the first:\n%s", n, logs.String())
		}
		time.Sleep(guard.FailureLogInterval)
		tok.Valid("wrong-xyzzy")
		if n := strings.Count(logs.String(), "API tokens refused"); n != 2 || !strings.Contains(logs.String(), "refused=100") {
			t.Errorf("a minute on, %d lines, want a second counting the 100 since:\n%s", n, logs.String())
		}
		if strings.Contains(logs.String(), "xyzzy") || strings.Contains(logs.String(), "kkkk") {
			t.Errorf("a token was logged:\n%s", logs.String())
		}
	})
}
