package auth_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bigseg/bigseg/internal/auth"
)

// write writes a file of the test's, as an operator or a secret's mount would.
func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTokensList(t *testing.T) {
	tok, err := auth.NewTokens([]string{" a ", "b", ""}, "", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token string
		want  bool
	}{{"a", true}, {"b", true}, {"", false}, {"c", false}, {"a ", false}, {"ab", false}} {
		if got := (tok.Scope(c.token) != nil); got != c.want {
			t.Errorf("Scope(%q) != nil = %v, want %v", c.token, got, c.want)
		}
	}
	if !tok.Enabled() {
		t.Error("not enabled with tokens")
	}
	open, _ := auth.NewTokens(nil, "", slog.New(slog.DiscardHandler), nil)
	if open.Enabled() || (open.Scope("") != nil) {
		t.Error("no tokens: enabled, or the empty token valid")
	}
}

// TestTokenScopes: a token of the file may open some environments only: refused (403) on the
// others and on requests about every environment; a token without a scope, or of the list,
// opens every one. A scope naming an environment not served is an error at start.
func TestTokenScopes(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/tokens", "tok-all\ntok-staging staging\ntok-two staging,qa\n")
	tok, err := auth.NewTokens(nil, dir+"/tokens", slog.New(slog.DiscardHandler), nil, "production", "staging", "qa")
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
		if got := tok.Authorizes(req, c.env); got != (c.want == 200) {
			t.Errorf("%s on %q: Authorizes says %v, Require %d", c.token, c.env, got, c.want)
		}
	}
	twice := httptest.NewRequest(http.MethodGet, "/", nil)
	twice.Header["Authorization"] = []string{"Bearer tok-all", "Bearer tok-all"}
	if tok.Authorizes(twice, "production") {
		t.Error("Authorizes lets through two Authorization headers, which Require refuses")
	}
	list, _ := auth.NewTokens([]string{"listed"}, "", slog.New(slog.DiscardHandler), nil, "production")
	if !list.Scope("listed").Opens("production") || !list.Scope("listed").Opens("") {
		t.Error("a token of BIGSEG_API_TOKENS does not open every environment")
	}
	write(t, dir+"/bad", "tok-x prod\n")
	if _, err := auth.NewTokens(nil, dir+"/bad", slog.New(slog.DiscardHandler), nil, "production"); err == nil ||
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
		_, err := auth.NewTokens(nil, dir+"/bad", slog.New(slog.DiscardHandler), nil, "production", "staging")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "tok-a") {
			t.Errorf("%q: %v, want %q and no token", c.file, err, c.want)
		}
	}
	// A byte order mark before the first token is not part of it.
	write(t, dir+"/bom", "\uFEFFtok-bom\n")
	if bom, err := auth.NewTokens(nil, dir+"/bom", slog.New(slog.DiscardHandler), nil, "production"); err != nil || !(bom.Scope("tok-bom") != nil) {
		t.Errorf("a file with a byte order mark: %v", err)
	}
}

// TestSessionFollowsReloads: a session (a connection's AUTH) opens what its token opens as the
// file is now: a token rescoped opens its new environments only, a token revoked nothing, and
// a token given back opens again.
func TestSessionFollowsReloads(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/tokens", "tok-a\ntok-b staging\n")
	tok, err := auth.NewTokens(nil, dir+"/tokens", slog.New(slog.DiscardHandler), nil, "production", "staging")
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
	var none *auth.Session
	if none.Scope().Opens("production") {
		t.Error("a nil session opens something")
	}
}

// TestRefusedTokensLogged: refused tokens are logged, the first at once, then one line per
// minute that counts them; short tokens are said at start; no token is logged.
func TestRefusedTokensLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		tok, _ := auth.NewTokens([]string{"short", strings.Repeat("k", auth.MinTokenLength)}, "", slog.New(slog.NewTextHandler(&logs, nil)), nil)
		if !strings.Contains(logs.String(), "short=1") {
			t.Errorf("one short token, not said:\n%s", logs.String())
		}
		for range 100 {
			tok.Scope("wrong-xyzzy")
		}
		if n := strings.Count(logs.String(), "API tokens refused"); n != 1 || !strings.Contains(logs.String(), "refused=1") {
			t.Errorf("after 100 refusals in a moment, %d lines, want 1 counting the first:\n%s", n, logs.String())
		}
		time.Sleep(time.Minute)
		tok.Scope("wrong-xyzzy")
		if n := strings.Count(logs.String(), "API tokens refused"); n != 2 || !strings.Contains(logs.String(), "refused=100") {
			t.Errorf("a minute on, %d lines, want a second counting the 100 since:\n%s", n, logs.String())
		}
		if strings.Contains(logs.String(), "xyzzy") || strings.Contains(logs.String(), "kkkk") {
			t.Errorf("a token was logged:\n%s", logs.String())
		}
	})
}
