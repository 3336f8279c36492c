package handlers_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
)

func TestBearerTokens(t *testing.T) {
	srv := newServer(t, memoryStore(t, map[string]fixture.Context{"alice": {Included: []string{"a.g1"}}}),
		defended(handlers.Config{StoreName: "embedded", Metrics: http.NotFoundHandler()}, newTokens([]string{"token-one", "token-two"})))
	lookups := []struct{ method, path, body string }{
		{"GET", "/memberships/alice", ""},
		{"GET", "/memberships?contextHash=" + strings.ReplaceAll(segments.Hash("alice"), "+", "%2B"), ""},
		{"POST", "/memberships", `{"contextKeys":["alice"]}`},
	}
	tests := []struct {
		name, auth string
		code       int
	}{
		{"no header", "", 401},
		{"first token", "Bearer token-one", 200},
		{"second token", "Bearer token-two", 200},
		{"scheme is case-insensitive", "bearer token-one", 200},
		{"wrong token", "Bearer token-three", 401},
		{"prefix of a token", "Bearer token-", 401},
		{"token with more", "Bearer token-one-and-more", 401},
		{"basic auth", "Basic dG9rZW4tb25lOg==", 401},
		{"no scheme", "token-one", 401},
		{"empty bearer", "Bearer ", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bodies []string
			for _, l := range lookups {
				req, _ := http.NewRequest(l.method, srv.URL+l.path, strings.NewReader(l.body))
				req.Header.Set("Content-Type", "application/json")
				if tt.auth != "" {
					req.Header.Set("Authorization", tt.auth)
				}
				resp, body := apitest.Do(t, nil, req)
				if resp.StatusCode != tt.code {
					t.Errorf("%s %s: %d %s, want %d", l.method, l.path, resp.StatusCode, body, tt.code)
				}
				if tt.code == 401 {
					if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
						t.Errorf("WWW-Authenticate = %q", got)
					}
					bodies = append(bodies, string(body))
				}
			}
			for _, b := range bodies { // no hint of what was wrong: one answer for every failure
				if b != "{\"error\":\"a valid bearer token is required\"}\n" {
					t.Errorf("401 body %q", b)
				}
			}
		})
	}
	for _, path := range []string{"/livez", "/healthz", "/readyz", "/status", "/openapi.yaml", "/metrics"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 401 {
			t.Errorf("%s requires a token; it must stay open", path)
		}
	}
}

func TestAccessLogHasNoKeys(t *testing.T) {
	srv, logged := accessLogged(t)
	get(t, srv.URL+"/memberships/secret-person%40example.com")
	get(t, srv.URL+"/memberships?contextHash="+strings.ReplaceAll(segments.Hash("secret-person@example.com"), "+", "%2B"))
	out := logged()
	if !strings.Contains(out, `"level":"DEBUG","msg":"request"`) || !strings.Contains(out, `"route":"/memberships/{contextKey}"`) || !strings.Contains(out, `"code":200`) {
		t.Errorf("access log lacks the route or code:\n%s", out)
	}
	if strings.Contains(out, "secret-person") {
		t.Errorf("access log holds a context key:\n%s", out)
	}
}

// accessLogged returns a server that logs at debug level, where requests are logged, and a
// func that returns what it has logged so far.
func accessLogged(t *testing.T) (*httptest.Server, func() string) {
	w := &lockedWriter{}
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return newServer(t, memoryStore(t, nil), handlers.Config{StoreName: "embedded", Log: log}), w.String
}

// At info level, requests are not logged.
func TestAccessLogOnlyAtDebug(t *testing.T) {
	w := &lockedWriter{}
	srv := newServer(t, memoryStore(t, nil), handlers.Config{Log: slog.New(slog.NewJSONHandler(w, nil))})
	get(t, srv.URL+"/memberships/alice")
	if out := w.String(); strings.Contains(out, "request") {
		t.Errorf("a request logged at info level:\n%s", out)
	}
}

// lockedWriter is a buffer that the server's goroutines write to and the test reads.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The access log is told of every answered request, like the metrics: those refused by the
// middleware too (here a body where none is read), not only those that reach a route.
func TestAccessLogCoversRefusedRequests(t *testing.T) {
	srv, logged := accessLogged(t)
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/memberships/alice", strings.NewReader("a body"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET with a body: %s", resp.Status)
	}
	if out := logged(); !strings.Contains(out, `"method":"GET","route":"unmatched","code":400`) { // refused before routing
		t.Errorf("no access log line for the refused request:\n%s", out)
	}
}
