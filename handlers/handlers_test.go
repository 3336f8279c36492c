package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/internal/limit"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
)

// trickyKeys are context keys that stress path escaping.
var trickyKeys = []string{
	"alice", "a/b", "/leading", "trailing/", "a//b", "100%", "%2F", "%zz", "a+b", "with space",
	"zoë", "日本語", "emoji 🎉", "?query", "#frag", "a;b=c", "..", ".", "'\"<>", "tab\there",
}

// newServer serves the handler over the embedded store holding fixture entries, with the
// batch bodies' memory budget that cmd/server gives it, unless cfgs sets one.
func newServer(t *testing.T, store segments.Store, cfgs ...handlers.Config) *httptest.Server {
	t.Helper()
	svc := oneService(store)
	var cfg handlers.Config
	if len(cfgs) > 0 {
		cfg = cfgs[0]
	}
	if cfg.Batches == nil {
		cfg = defended(cfg, nil)
	}
	srv := httptest.NewServer(handlers.New(cfg, svc))
	t.Cleanup(srv.Close)
	return srv
}

// newTokens is the accepted tokens of a server that requires them.
func newTokens(tokens []string) *auth.Tokens {
	t, _ := auth.NewTokens(tokens, "", nil, nil)
	return t
}

// defended is cfg with defences composed as cmd/server composes them: the check of tokens (if
// not nil) on every route about the environments of names ("default", the one of oneService,
// if none), and batch bodies read within the default memory budget. Stream slots are left to
// the tests of them.
func defended(cfg handlers.Config, tokens *auth.Tokens, names ...string) handlers.Config {
	if len(names) == 0 {
		names = []string{"default"}
	}
	check := func(next http.Handler) http.Handler { return next }
	if tokens != nil {
		check, cfg.Authorized = tokens.Require(handlers.Error, handlers.Scope(names...)), tokens.Authorizes
	}
	maxBody := cfg.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = handlers.DefaultMaxBodyBytes
	}
	bodies := limit.NewBodies(limit.DefaultBodyMemory).Limit(maxBody, handlers.DefaultBodyReadTimeout, handlers.BatchUses(cfg.MaxBatch), handlers.Error)
	cfg.Lookups, cfg.Views, cfg.Streams = check, check, check
	cfg.Batches = func(next http.Handler) http.Handler { return check(bodies(next)) }
	return cfg
}

func memoryStore(t *testing.T, keys map[string]fixture.Context) *memory.Store {
	t.Helper()
	f := &fixture.Fixture{}
	for k, c := range keys {
		c.Key, c.Hash = k, segments.Hash(k)
		f.Contexts = append(f.Contexts, c)
	}
	return memory.New(f, time.Now)
}

func get(t *testing.T, rawURL string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return apitest.Do(t, nil, req)
}

func post(t *testing.T, rawURL, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, rawURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return apitest.Do(t, nil, req)
}

type lookup struct {
	ContextKey  *string         `json:"contextKey"`
	ContextHash string          `json:"contextHash"`
	Memberships map[string]bool `json:"memberships"`
	Status      string          `json:"status"`
	Error       string          `json:"error"`
}

func TestLookupTrickyKeys(t *testing.T) {
	entries := map[string]fixture.Context{}
	for i, k := range trickyKeys {
		entries[k] = fixture.Context{Included: []string{"seg-" + string(rune('a'+i)) + ".g1"}}
	}
	srv := newServer(t, memoryStore(t, entries))
	for i, key := range trickyKeys {
		// The same key, escaped as url.PathEscape does and with everything escaped.
		encodings := []string{url.PathEscape(key), escapeAll(key)}
		for _, enc := range encodings {
			resp, body := get(t, srv.URL+"/memberships/"+enc)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%q as %q: %d %s", key, enc, resp.StatusCode, body)
				continue
			}
			got := apitest.Decode[lookup](t, body)
			want := lookup{ContextKey: &key, ContextHash: segments.Hash(key),
				Memberships: map[string]bool{"seg-" + string(rune('a'+i)) + ".g1": true}, Status: "HEALTHY"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%q as %q (-want +got):\n%s", key, enc, diff)
			}
		}
	}
}

// escapeAll percent-encodes every byte, which a server must accept like any other escaping.
func escapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteString("%" + strings.ToUpper(hex2(s[i])))
	}
	return b.String()
}

func hex2(c byte) string { return string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&0xf]) }

func TestLookupNoMembership(t *testing.T) {
	srv := newServer(t, memoryStore(t, nil))
	resp, body := get(t, srv.URL+"/memberships/nobody")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if want := `"memberships":{}`; !strings.Contains(string(body), want) {
		t.Errorf("body %s lacks %s", body, want)
	}
}

func TestLookupBadKeys(t *testing.T) {
	srv := newServer(t, memoryStore(t, nil), handlers.Config{MaxKeyBytes: 10})
	tests := []struct {
		path string
		code int
		want string
	}{
		{"/memberships/" + strings.Repeat("a", 11), 400, "longer than 10 bytes"},
		{"/memberships/" + strings.Repeat("a", 10), 200, ""},
		{"/memberships/%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9a", 400, "longer than 10 bytes"}, // 11 bytes, 6 characters
		{"/memberships/%FF", 400, "not valid UTF-8"},
		{"/memberships/a%2F%FF", 400, "not valid UTF-8"},
		{"/memberships/", 404, "context key is empty"},
		{"/memberships/a?contextHash=YQ==", 400, "not both"},
		{"/memberships/a/explain?contextHash=YQ==", 400, "not both"},
		{"/memberships/a?other=1", 200, ""},
	}
	for _, tt := range tests {
		resp, body := get(t, srv.URL+tt.path)
		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s: %d %s, want %d containing %q", tt.path, resp.StatusCode, body, tt.code, tt.want)
		}
	}
}

func TestLookupByHash(t *testing.T) {
	srv := newServer(t, memoryStore(t, map[string]fixture.Context{"dave": {Included: []string{"vip.g2"}}}))
	dave := segments.Hash("dave") // holds '+' and '/'
	tests := []struct {
		name, query string
		code        int
		want        string
	}{
		{"escaped", "contextHash=" + url.QueryEscape(dave), 200, `"memberships":{"vip.g2":true}`},
		{"unescaped plus and slash", "contextHash=" + dave, 200, `"memberships":{"vip.g2":true}`},
		{"unknown hash", "contextHash=" + url.QueryEscape(segments.Hash("nobody")), 200, `"memberships":{}`},
		{"missing", "", 400, "contextHash query parameter is required"},
		{"empty", "contextHash=", 400, "empty"},
		{"twice", "contextHash=YWJj&contextHash=YWJj", 400, "once"},
		{"URL-safe alphabet", "contextHash=" + strings.NewReplacer("+", "-", "/", "_").Replace(dave), 400, "alphabet"},
		{"not padded", "contextHash=YWJjZA", 400, "base64"},
		{"too long", "contextHash=" + strings.Repeat("Q", 132), 400, "132 characters long, more than 128"},
		{"base64 of 3 bytes, as LaunchDarkly's store suites send", "contextHash=YWJj", 200, `"memberships":{}`},
		{"hex", "contextHash=" + hexSHA256("dave"), 400, "looks like hex; a context hash is the standard base64"},
		{"bad query escape", "contextHash=%zz", 400, "query string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, srv.URL+"/memberships?"+tt.query)
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.want) {
				t.Fatalf("%d %s, want %d containing %q", resp.StatusCode, body, tt.code, tt.want)
			}
			if tt.code == 200 && strings.Contains(string(body), "contextKey") {
				t.Errorf("hash lookup answered with a contextKey: %s", body)
			}
		})
	}
}

func TestBatch(t *testing.T) {
	srv := newServer(t, memoryStore(t, map[string]fixture.Context{
		"alice": {Included: []string{"beta.g3"}},
		"bob":   {Excluded: []string{"beta.g3"}},
	}))
	resp, body := post(t, srv.URL+"/memberships", "application/json",
		`{"contextHashes":["`+segments.Hash("bob")+`"],"contextKeys":["bob","nobody","alice","bob"]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got := apitest.Decode[struct{ Results []lookup }](t, body).Results
	s := func(v string) *string { return &v }
	want := []lookup{
		{ContextKey: s("bob"), ContextHash: segments.Hash("bob"), Memberships: map[string]bool{"beta.g3": false}, Status: "HEALTHY"},
		{ContextKey: s("nobody"), ContextHash: segments.Hash("nobody"), Memberships: map[string]bool{}, Status: "HEALTHY"},
		{ContextKey: s("alice"), ContextHash: segments.Hash("alice"), Memberships: map[string]bool{"beta.g3": true}, Status: "HEALTHY"},
		{ContextKey: s("bob"), ContextHash: segments.Hash("bob"), Memberships: map[string]bool{"beta.g3": false}, Status: "HEALTHY"},
		{ContextHash: segments.Hash("bob"), Memberships: map[string]bool{"beta.g3": false}, Status: "HEALTHY"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}

	resp, body = post(t, srv.URL+"/memberships", "application/json", `{}`)
	if resp.StatusCode != http.StatusOK || string(body) != "{\"results\":[]}\n" {
		t.Errorf("empty batch: %d %s", resp.StatusCode, body)
	}
}

// TestBatchWithoutBodies: without Config.Bodies (no memory budget), a batch body is still
// read whole up to MaxBodyBytes, and one larger is refused.
func TestBatchWithoutBodies(t *testing.T) {
	srv := httptest.NewServer(handlers.New(handlers.Config{MaxBodyBytes: 200}, oneService(memoryStore(t, nil))))
	defer srv.Close()
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"contextKeys": ["alice"]}`, 200},
		{`{"contextKeys": ["` + strings.Repeat("a", 300) + `"]}`, 400},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/memberships", strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, body := apitest.Do(t, nil, req)
		if resp.StatusCode != c.code {
			t.Errorf("body of %d bytes: %d %s, want %d", len(c.body), resp.StatusCode, body, c.code)
		}
	}
}

func TestBatchBadRequests(t *testing.T) {
	srv := newServer(t, memoryStore(t, nil), handlers.Config{MaxBatch: 3, MaxBodyBytes: 200, MaxKeyBytes: 20})
	tests := []struct {
		name, contentType, body string
		code                    int
		want                    string
	}{
		{"no content type", "", `{}`, 415, "Content-Type must be application/json"},
		{"form content type", "application/x-www-form-urlencoded", `{}`, 415, "application/json"},
		{"charset is fine", "application/json; charset=utf-8", `{}`, 200, ""},
		{"empty body", "application/json", ``, 400, "request body is empty"},
		{"not JSON", "application/json", `{"contextKeys": [alice]}`, 400, "not valid JSON at byte"},
		{"truncated", "application/json", `{"contextKeys": ["alice"`, 400, "truncated"},
		{"array body", "application/json", `["alice"]`, 400, "must be a JSON object"},
		{"keys not strings", "application/json", `{"contextKeys": [1]}`, 400, "contextKeys must be an array of strings"},
		{"keys not an array", "application/json", `{"contextKeys": "alice"}`, 400, "contextKeys must be an array of strings"},
		{"unknown field", "application/json", `{"contextKey": ["alice"]}`, 400, `unknown field "contextKey"`},
		{"two values", "application/json", `{} {}`, 400, "more than one JSON value"},
		{"trailing brace", "application/json", `{}}`, 400, "more than one JSON value"},
		{"trailing whitespace is fine", "application/json", "{}\n\t ", 200, ""},
		{"too many", "application/json", `{"contextKeys": ["a","b"], "contextHashes": ["YWJj","YWJj"]}`, 400, "batch of 4 lookups is over the limit of 3"},
		{"too big", "application/json", `{"contextKeys": ["` + strings.Repeat("a", 300) + `"]}`, 413, "larger than 200 bytes"},
		{"empty key", "application/json", `{"contextKeys": ["a", ""]}`, 400, "contextKeys[1]: context key is empty"},
		{"long key", "application/json", `{"contextKeys": ["` + strings.Repeat("a", 21) + `"]}`, 400, "contextKeys[0]: context key is longer than 20 bytes"},
		{"bad hash", "application/json", `{"contextHashes": ["` + segments.Hash("a") + `", "a b"]}`, 400, "contextHashes[1]: "},
		{"hex hash", "application/json", `{"contextHashes": ["` + hexSHA256("a") + `"]}`, 400, "contextHashes[0]: context hash looks like hex"},
		{"invalid UTF-8", "application/json", "{\"contextKeys\": [\"\xff\"]}", 400, "not valid UTF-8"},
		{"lone high surrogate", "application/json", `{"contextKeys": ["\ud800"]}`, 400, "lone UTF-16 surrogate"},
		{"lone low surrogate", "application/json", `{"contextKeys": ["a\udc00"]}`, 400, "lone UTF-16 surrogate"},
		{"surrogate pair is fine", "application/json", `{"contextKeys": ["\ud83c\udf89"]}`, 200, ""},
		{"null body", "application/json", `null`, 400, "must be a JSON object"},
		{"null keys", "application/json", `{"contextKeys": null}`, 400, "contextKeys must be an array of strings"},
		{"field twice", "application/json", `{"contextKeys": ["a"], "contextKeys": ["b"]}`, 400, `field "contextKeys" appears twice`},
		{"field in another case", "application/json", `{"ContextKeys": ["a"]}`, 400, `unknown field "ContextKeys"`},
		{"compressed body", "application/json", "gzip:{}", 415, "Content-Encoding must be identity"},
		{"content type twice", "application/json|application/json", `{}`, 415, "given once"},
		{"a charset other than UTF-8", "application/json; charset=latin1", `{}`, 415, "UTF-8"},
		{"content encoding twice", "application/json", "identity,identity:{}", 415, "Content-Encoding must be identity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/memberships", strings.NewReader(tt.body))
			for ct := range strings.SplitSeq(tt.contentType, "|") {
				if ct != "" {
					req.Header.Add("Content-Type", ct)
				}
			}
			if enc, rest, ok := strings.Cut(tt.body, ":"); ok && !strings.HasPrefix(enc, "{") {
				req, _ = http.NewRequest(http.MethodPost, srv.URL+"/memberships", strings.NewReader(rest))
				req.Header.Set("Content-Type", tt.contentType)
				for e := range strings.SplitSeq(enc, ",") {
					req.Header.Add("Content-Encoding", e)
				}
			}
			resp, body := apitest.Do(t, nil, req)
			msg := apitest.Decode[map[string]any](t, body)["error"]
			if resp.StatusCode != tt.code || tt.code != 200 && !strings.Contains(msg.(string), tt.want) {
				t.Fatalf("%d %s, want %d containing %q", resp.StatusCode, body, tt.code, tt.want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// failingStore fails every read, and metadata reads while metaErr is set.
type failingStore struct {
	readErr, metaErr error
}

func (f failingStore) Memberships(ctx context.Context, hashes []string) []segments.Read {
	reads := make([]segments.Read, len(hashes))
	for i := range reads {
		reads[i].Err = f.readErr
	}
	return reads
}

func (f failingStore) Metadata(ctx context.Context) (segments.Metadata, error) {
	return segments.Metadata{LastSynchronized: time.Now()}, f.metaErr
}

func TestStoreErrors(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.7:6379: secret internals")
	srv := newServer(t, failingStore{readErr: secret})
	for _, path := range []string{"/memberships/alice", "/memberships?contextHash=" + url.QueryEscape(segments.Hash("alice"))} {
		resp, body := get(t, srv.URL+path)
		got := apitest.Decode[lookup](t, body)
		if resp.StatusCode != http.StatusServiceUnavailable || got.Status != "STORE_ERROR" || got.Error == "" || got.Memberships != nil {
			t.Errorf("%s: %d %s, want 503 STORE_ERROR with an error and no memberships", path, resp.StatusCode, body)
		}
		if strings.Contains(string(body), "secret") {
			t.Errorf("%s: internal error leaked: %s", path, body)
		}
	}
	resp, body := post(t, srv.URL+"/memberships", "application/json", `{"contextKeys":["alice","bob"]}`)
	results := apitest.Decode[struct{ Results []lookup }](t, body).Results
	if resp.StatusCode != http.StatusOK || len(results) != 2 || results[1].Status != "STORE_ERROR" || results[1].Error == "" {
		t.Errorf("batch: %d %s, want 200 with a STORE_ERROR per lookup", resp.StatusCode, body)
	}
}

func TestUnavailableStoreButSuccessfulRead(t *testing.T) {
	srv := newServer(t, failingStore{metaErr: fmt.Errorf("%w: not a number", segments.ErrInvalidMetadata)})
	resp, body := get(t, srv.URL+"/memberships/alice")
	got := apitest.Decode[lookup](t, body)
	if resp.StatusCode != http.StatusOK || got.Status != "STORE_ERROR" || got.Memberships == nil || got.Error != "" {
		t.Errorf("%d %s, want 200, status STORE_ERROR, memberships and no error", resp.StatusCode, body)
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	srv := newServer(t, memoryStore(t, nil))
	resp, body := get(t, srv.URL+"/nope")
	if resp.StatusCode != http.StatusNotFound || apitest.Decode[map[string]string](t, body)["error"] == "" {
		t.Errorf("unknown route: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/memberships", nil)
	resp, body = apitest.Do(t, nil, req)
	if resp.StatusCode != http.StatusMethodNotAllowed || apitest.Decode[map[string]string](t, body)["error"] == "" {
		t.Errorf("DELETE /memberships: %d %s", resp.StatusCode, body)
	}
	allow := resp.Header.Values("Allow")
	sort.Strings(allow)
	if !slices.Equal(allow, []string{"GET", "HEAD", "OPTIONS", "POST"}) {
		t.Errorf("Allow = %q, want GET, HEAD, OPTIONS and POST", allow)
	}
}

// The operators' listener serves the probes and Go's /debug/pprof, and no lookup; the API
// serves no /debug/pprof.
func TestOpsRoutes(t *testing.T) {
	svc := oneService(memoryStore(t, nil))
	ops := httptest.NewServer(handlers.NewOps(handlers.Config{}, svc))
	defer ops.Close()
	api := httptest.NewServer(handlers.New(handlers.Config{}, svc))
	defer api.Close()
	for url, want := range map[string]int{ops.URL + "/livez": 200, ops.URL + "/debug/pprof/": 200,
		ops.URL + "/debug/pprof/goroutine?debug=1": 200, ops.URL + "/memberships/alice": 404, api.URL + "/debug/pprof/goroutine?debug=1": 404} {
		resp, err := http.Get(url) // pprof's answers are no API's: not checked against api/openapi.yaml
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", url, resp.StatusCode, want)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	srv := newServer(t, memoryStore(t, nil))
	resp, body := get(t, srv.URL+"/openapi.yaml")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "openapi: 3.0") {
		t.Errorf("%d %.40s", resp.StatusCode, body)
	}
}

// TestRoutesMatchSpec keeps routes.go and api/openapi.yaml listing the same operations.
func TestRoutesMatchSpec(t *testing.T) {
	h := handlers.New(handlers.Config{Metrics: http.NotFoundHandler()}, oneService(memoryStore(t, nil)))
	var routes []string
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var spec []string
	for path, item := range apitest.Spec(t).Paths.Map() {
		for method := range item.Operations() {
			spec = append(spec, method+" "+path)
		}
	}
	sort.Strings(routes)
	sort.Strings(spec)
	if diff := cmp.Diff(spec, routes); diff != "" {
		t.Errorf("routes.go and api/openapi.yaml differ (-spec +routes):\n%s", diff)
	}
}

func TestStorePanicIsAnError(t *testing.T) {
	srv := newServer(t, panickingStore{})
	resp, err := http.Get(srv.URL + "/memberships/alice")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"error"`) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

type panickingStore struct{ failingStore }

func (panickingStore) Memberships(context.Context, []string) []segments.Read { panic("bug") }

// nilTime is a clock for stores whose synchronization time does not matter.
var nilTime = time.Now

func TestStorePanicInBatchIsAnError(t *testing.T) {
	srv := newServer(t, panickingStore{})
	resp, body := post(t, srv.URL+"/memberships", "application/json", `{"contextKeys":["alice","bob"]}`)
	results := apitest.Decode[struct{ Results []lookup }](t, body).Results
	if resp.StatusCode != 200 || len(results) != 2 || results[0].Status != "STORE_ERROR" || results[1].Error == "" {
		t.Errorf("%d %s, want 200 with a STORE_ERROR per lookup", resp.StatusCode, body)
	}
}

// Every GET route answers HEAD with the GET answer's status and headers and no body (load
// balancers probe with HEAD); OPTIONS answers 204 with Allow; unknown methods stay 405.
func TestHeadAndOptions(t *testing.T) {
	srv := newServer(t, memoryStore(t, map[string]fixture.Context{"alice": {Included: []string{"a.g1"}}}),
		handlers.Config{StoreName: "embedded", Metrics: http.NotFoundHandler()})
	for _, path := range []string{"/memberships/alice", "/memberships?contextHash=" + url.QueryEscape(segments.Hash("alice")),
		"/status", "/status/stream", "/livez", "/healthz", "/readyz", "/openapi.yaml", "/segments", "/memberships/alice/explain",
		"/explain?contextHash=" + url.QueryEscape(segments.Hash("alice"))} {
		getResp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		getResp.Body.Close()
		req, _ := http.NewRequest(http.MethodHead, srv.URL+path, nil)
		resp, body := apitest.Do(t, nil, req)
		if resp.StatusCode != getResp.StatusCode || len(body) != 0 ||
			resp.Header.Get("Content-Type") != getResp.Header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d %q %v, want GET's %d %v and no body", path, resp.StatusCode, body, resp.Header, getResp.StatusCode, getResp.Header)
		}
	}
	tests := []struct {
		path  string
		allow []string
	}{
		{"/memberships", []string{"GET", "HEAD", "OPTIONS", "POST"}},
		{"/memberships/alice", []string{"GET", "HEAD", "OPTIONS"}},
		{"/memberships/alice/explain", []string{"GET", "HEAD", "OPTIONS"}},
		{"/segments", []string{"GET", "HEAD", "OPTIONS"}},
		{"/readyz", []string{"GET", "HEAD", "OPTIONS"}},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodOptions, srv.URL+tt.path, nil)
		resp, body := apitest.Do(t, nil, req)
		allow := resp.Header.Values("Allow")
		sort.Strings(allow)
		if resp.StatusCode != http.StatusNoContent || len(body) != 0 || !slices.Equal(allow, tt.allow) {
			t.Errorf("OPTIONS %s: %d %q Allow %q, want 204 with Allow %q", tt.path, resp.StatusCode, body, allow, tt.allow)
		}
	}
	// On a path of no route, every method is a 404, made-up ones too (chi sends those to
	// the 405 handler whatever the path).
	for _, method := range []string{http.MethodOptions, http.MethodDelete, "FOO", "PROPFIND"} {
		for _, path := range []string{"/nope", "/status/", "/environments/default", "/environments/default/x"} {
			req, _ := http.NewRequest(method, srv.URL+path, nil)
			if resp, _ := apitest.Do(t, nil, req); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Allow") != "" {
				t.Errorf("%s %s: %d, Allow %q; want 404 and no Allow", method, path, resp.StatusCode, resp.Header.Values("Allow"))
			}
		}
	}
	req, _ := http.NewRequest("FOO", srv.URL+"/memberships/alice", nil)
	if resp, _ := apitest.Do(t, nil, req); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("FOO on a route: %d, want 405", resp.StatusCode)
	}
}

// Answers are personal data (lookups) or change from one moment to the next (status, probes):
// none may be cached by a proxy or client.
func TestNoStore(t *testing.T) {
	srv := newServer(t, memoryStore(t, nil), handlers.Config{StoreName: "embedded"})
	for _, path := range []string{"/memberships/alice", "/memberships?contextHash=" + url.QueryEscape(segments.Hash("alice")),
		"/memberships/", "/status", "/livez", "/healthz", "/readyz", "/nope"} {
		resp, _ := get(t, srv.URL+path)
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", path, got)
		}
	}
	resp, _ := post(t, srv.URL+"/memberships", "application/json", `{"contextKeys":["alice"]}`)
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("POST /memberships: Cache-Control %q, want no-store", got)
	}
}

// manyRefsStore answers every context with the same membership of n refs.
type manyRefsStore struct{ m segments.Membership }

func newManyRefsStore(n int) manyRefsStore {
	refs := make([]string, n)
	for i := range refs {
		refs[i] = "segment-" + strconv.Itoa(i) + ".g1"
	}
	return manyRefsStore{segments.NewMembership(refs, nil)}
}

func (s manyRefsStore) Memberships(_ context.Context, hashes []string) []segments.Read {
	reads := make([]segments.Read, len(hashes))
	for i := range reads {
		reads[i].Membership = s.m
	}
	return reads
}

func (manyRefsStore) Metadata(context.Context) (segments.Metadata, error) {
	return segments.Metadata{LastSynchronized: time.Now()}, nil
}

// A small batch must not make a huge answer: a context with many refs asked for many times is
// refused once the answer would pass the limit of refs, and an answer under it is streamed
// whole, however large.
func TestBatchAnswerBound(t *testing.T) {
	srv := newServer(t, newManyRefsStore(10_000), handlers.Config{MaxBatchRefs: 50_000})
	body := func(n int) string {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = `"alice"`
		}
		return `{"contextKeys":[` + strings.Join(keys, ",") + `]}`
	}
	resp, b := post(t, srv.URL+"/memberships", "application/json", body(6))
	if msg := apitest.Decode[map[string]string](t, b)["error"]; resp.StatusCode != 400 || !strings.Contains(msg, "60000 segment refs, over the limit of 50000") {
		t.Errorf("6 x 10,000 refs: %d %s, want 400 over the limit", resp.StatusCode, b)
	}
	resp, b = post(t, srv.URL+"/memberships", "application/json", body(5))
	results := apitest.Decode[struct{ Results []lookup }](t, b).Results
	if resp.StatusCode != 200 || len(results) != 5 || len(results[4].Memberships) != 10_000 {
		t.Fatalf("5 x 10,000 refs: %d, %d results", resp.StatusCode, len(results))
	}
	if resp.ContentLength != -1 || len(resp.TransferEncoding) == 0 {
		t.Errorf("a %d-byte answer was not streamed: Content-Length %d, Transfer-Encoding %v", len(b), resp.ContentLength, resp.TransferEncoding)
	}
}

// Metric and log labels come from fixed sets whatever methods clients make up.
func TestRequestLabelsAreBounded(t *testing.T) {
	var mu sync.Mutex
	routes, methods := map[string]bool{}, map[string]bool{}
	srv := newServer(t, memoryStore(t, nil), handlers.Config{Observe: func(route, method string, _ int, _ time.Duration) {
		mu.Lock()
		routes[route], methods[method] = true, true
		mu.Unlock()
	}})
	for i := range 50 {
		for _, path := range []string{"/memberships/alice", "/nope-" + strconv.Itoa(i)} {
			req, _ := http.NewRequest("X"+strconv.Itoa(i)+strings.Repeat("M", i*100), srv.URL+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	get(t, srv.URL+"/memberships/alice")
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]bool{"other": true, "GET": true}; !maps.Equal(methods, want) {
		t.Errorf("method labels %v, want %v", slices.Sorted(maps.Keys(methods)), slices.Sorted(maps.Keys(want)))
	}
	if want := map[string]bool{"/memberships/{contextKey}": true, "unmatched": true}; !maps.Equal(routes, want) {
		t.Errorf("route labels %v, want %v", slices.Sorted(maps.Keys(routes)), slices.Sorted(maps.Keys(want)))
	}
}

// A 405, and the answer to OPTIONS, on a path that has routes are labelled "unmatched": chi
// matched no route for their method (the README's Metrics section says so).
func TestMethodsWithoutARouteAreUnmatched(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{} // method -> "route code"
	srv := newServer(t, memoryStore(t, nil), handlers.Config{Observe: func(route, method string, code int, _ time.Duration) {
		mu.Lock()
		got[method] = route + " " + strconv.Itoa(code)
		mu.Unlock()
	}})
	for _, m := range []string{http.MethodDelete, http.MethodOptions} {
		req, _ := http.NewRequest(m, srv.URL+"/memberships/alice", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]string{"DELETE": "unmatched 405", "OPTIONS": "unmatched 204"}; !maps.Equal(got, want) {
		t.Errorf("labels %v, want %v", got, want)
	}
}

// TestRequestBodiesOnlyWhereRead: a body is refused with GET, HEAD and OPTIONS; a wrong method
// or route with a body is a 405 or 404 as without one; and a request refused before its body was
// read has its connection closed at once, not read to the end of a body that may never come.
func TestRequestBodiesOnlyWhereRead(t *testing.T) {
	srv := newServer(t, memoryStore(t, nil), defended(handlers.Config{}, newTokens([]string{"s3cret"})))
	for _, tt := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{"GET", "/memberships/alice", 400, "takes no request body"}, {"GET", "/status", 400, "takes no request body"},
		{"OPTIONS", "/memberships", 400, "takes no request body"}, {"GET", "/nowhere", 400, "takes no request body"},
		{"POST", "/status", 405, "not allowed"}, {"DELETE", "/memberships", 405, "not allowed"}, {"PATCH", "/nowhere", 404, "no such route"},
	} {
		req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader("x"))
		resp, body := apitest.Do(t, nil, req)
		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.msg) || !resp.Close {
			t.Errorf("%s %s with a body: %d %s (close %v), want %d and the connection closed", tt.method, tt.path, resp.StatusCode, body, resp.Close, tt.code)
		}
	}
	for name, headers := range map[string]string{
		"wrong token":        "Authorization: Bearer nope\r\nContent-Type: application/json\r\n",
		"wrong content type": "Authorization: Bearer s3cret\r\nContent-Type: text/plain\r\n",
		"body too large":     "Authorization: Bearer s3cret\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n",
		"body too large, 100-continue expected": "Authorization: Bearer s3cret\r\nContent-Type: application/json\r\n" +
			"Content-Length: 2000000\r\nExpect: 100-continue\r\n",
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(headers, "Content-Length") {
			headers += "Content-Length: 100000\r\n"
		}
		fmt.Fprintf(conn, "POST /memberships HTTP/1.1\r\nHost: x\r\n%s\r\n", headers) // and no body
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))                        // a hang detector
		got, err := io.ReadAll(conn)
		conn.Close()
		if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 4") {
			t.Errorf("%s, body never sent: %v after %q; want a 4xx and the connection closed", name, err, got)
		}
		if strings.HasPrefix(name, "body too large") && !strings.HasPrefix(string(got), "HTTP/1.1 413") {
			t.Errorf("%s: %q, want 413 at once", name, got)
		}
	}
}

// hexSHA256 is the SHA-256 of key in hex: 64 characters, valid base64 of 48 bytes, not a hash.
func hexSHA256(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
