package auth_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bigseg/bigseg/internal/auth"
)

// TestRequire: one Authorization header naming an accepted token lets a request through;
// none, a wrong one or another scheme gets 401 with WWW-Authenticate, and more than one header,
// which a proxy and the server could read differently, 400.
func TestRequire(t *testing.T) {
	tok, _ := auth.NewTokens([]string{"secret"}, "", slog.New(slog.DiscardHandler), nil)
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

// TestRequireWithoutTokens: with no tokens the server is open: Require lets every request
// through, and Authorizes always says yes.
func TestRequireWithoutTokens(t *testing.T) {
	open, _ := auth.NewTokens(nil, "", slog.New(slog.DiscardHandler), nil)
	refuse := func(w http.ResponseWriter, r *http.Request, code int, msg string) { http.Error(w, msg, code) }
	h := open.Require(refuse, func(*http.Request) string { return "production" })(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("no tokens: %d, want 200", rec.Code)
	}
	if !open.Authorizes(req, "production") {
		t.Error("no tokens: Authorizes says no")
	}
}
