package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
)

// describedStore is the embedded store naming the keys it would be read at as the Redis layout
// does, under prefix: a store that says where it keeps a context's data (handlers.Describer).
type describedStore struct {
	*memory.Store
	prefix string
}

func (d describedStore) Describe(hash string) segments.StoreView {
	v := segments.StoreView{Kind: "redis", Prefix: d.prefix}
	if hash != "" {
		v.Keys = []string{d.prefix + ":big_segment_include:" + hash, d.prefix + ":big_segment_exclude:" + hash}
	}
	return v
}

type inventoryJSON struct {
	Environment string
	Contexts    int64
	Segments    []struct {
		Ref                string
		Included, Excluded int64
	}
	Scan map[string]string
}

// GET /segments answers the environment's last inventory, fields that are zero left out, by
// the unscoped route and the environment's alike; before any scan, state none and no segments.
func TestInventory(t *testing.T) {
	svc := oneService(memoryStore(t, nil))
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "embedded"}, svc))
	t.Cleanup(srv.Close)

	resp, body := get(t, srv.URL+"/segments")
	if got := apitest.Decode[inventoryJSON](t, body); resp.StatusCode != 200 || got.Environment != "default" ||
		got.Segments == nil || len(got.Segments) != 0 || !cmp.Equal(got.Scan, map[string]string{"state": "none"}) {
		t.Errorf("before any scan: %d %s", resp.StatusCode, body)
	}

	started := time.Date(2026, 11, 29, 15, 20, 0, 0, time.UTC)
	svc.Environments()[0].SetInventory(segments.Inventory{
		State: segments.ScanRunning, Contexts: 120003,
		Segments:  []segments.SegmentCount{{Ref: "beta-users.g3", Included: 120000, Excluded: 3}, {Ref: "zoë \"q\".g1", Included: 1}},
		StartedAt: started, FinishedAt: started.Add(4200 * time.Millisecond), CursorStart: "1842", CursorFinish: "1843",
		LastError: "read: connection reset", LastErrorAt: started.Add(time.Hour),
	})
	want := `{"environment":"default","contexts":120003,"segments":[{"ref":"beta-users.g3","included":120000,"excluded":3},` +
		`{"ref":"zoë \"q\".g1","included":1,"excluded":0}],"scan":{"state":"running","startedAt":"2026-11-29T15:20:00Z",` +
		`"finishedAt":"2026-11-29T15:20:04.2Z","cursorAtStart":"1842","cursorAtEnd":"1843","lastError":"read: connection reset",` +
		`"lastErrorAt":"2026-11-29T16:20:00Z"}}` + "\n"
	for _, path := range []string{"/segments", "/environments/default/segments"} {
		if resp, body := get(t, srv.URL+path); resp.StatusCode != 200 || string(body) != want {
			t.Errorf("%s: %d\n%s\nwant\n%s", path, resp.StatusCode, body, want)
		}
	}
}

// An inventory of many refs is answered whole, streamed in chunks rather than built in memory.
func TestInventoryOfManyRefs(t *testing.T) {
	svc := oneService(memoryStore(t, nil))
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "embedded"}, svc))
	t.Cleanup(srv.Close)
	const n = 10_000
	counts := make([]segments.SegmentCount, n)
	for i := range counts {
		counts[i] = segments.SegmentCount{Ref: fmt.Sprintf("segment-with-a-longish-key-%05d.g1", i), Included: int64(n - i)}
	}
	svc.Environments()[0].SetInventory(segments.Inventory{State: segments.ScanComplete, Contexts: n, Segments: counts})
	resp, body := get(t, srv.URL+"/segments")
	got := apitest.Decode[inventoryJSON](t, body)
	if resp.StatusCode != 200 || len(got.Segments) != n || got.Segments[n-1].Ref != counts[n-1].Ref {
		t.Fatalf("%d, %d segments", resp.StatusCode, len(got.Segments))
	}
	if resp.ContentLength != -1 || len(resp.TransferEncoding) == 0 {
		t.Errorf("%d bytes answered with Content-Length %d, Transfer-Encoding %q: not streamed", len(body), resp.ContentLength, resp.TransferEncoding)
	}
}

// The store view takes the lookups' token check: a token scoped to another environment gets
// 403 for this one's inventory and explanations, none 401, its own environment's 200.
func TestStoreViewScopedTokens(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/tokens", []byte("tok-all\ntok-staging staging\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokens(nil, dir+"/tokens", nil, nil, "production", "staging", "qa")
	if err != nil {
		t.Fatal(err)
	}
	srv := threeEnvironments(t, defended(handlers.Config{StoreName: "embedded"}, tokens, "production", "staging", "qa"))
	hash := url.QueryEscape(segments.Hash("alice"))
	for _, c := range []struct {
		token, path string
		want        int
	}{
		{"tok-staging", "/environments/production/segments", 403},
		{"tok-staging", "/environments/production/memberships/alice/explain", 403},
		{"tok-staging", "/environments/production/explain?contextHash=" + hash, 403},
		{"tok-staging", "/segments", 403}, // every environment's: not this token's
		{"tok-staging", "/environments/staging/segments", 200},
		{"tok-staging", "/environments/staging/memberships/alice/explain", 200},
		{"tok-staging", "/environments/staging/explain?contextHash=" + hash, 200},
		{"", "/environments/staging/segments", 401},
		{"nope", "/environments/staging/memberships/alice/explain", 401},
		{"tok-all", "/environments/production/segments", 200},
		{"tok-all", "/segments", 404}, // several environments: say which
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if resp, body := apitest.Do(t, nil, req); resp.StatusCode != c.want {
			t.Errorf("%q %s: %d %s, want %d", c.token, c.path, resp.StatusCode, body, c.want)
		}
	}
}

type explainJSON struct {
	ContextKey  *string `json:"contextKey"`
	ContextHash string  `json:"contextHash"`
	Environment string  `json:"environment"`
	Store       struct {
		Kind   string  `json:"kind"`
		Prefix *string `json:"prefix"`
		Table  string  `json:"table"`
	} `json:"store"`
	Read struct {
		Keys     []string `json:"keys"`
		Included []string `json:"included"`
		Excluded []string `json:"excluded"`
	} `json:"read"`
	Memberships map[string]bool `json:"memberships"`
	Status      string          `json:"status"`
	Error       string          `json:"error"`
	Metadata    struct {
		SynchronizedOn int64  `json:"synchronizedOn"`
		Cursor         string `json:"cursor"`
	} `json:"metadata"`
	Cache struct{ Holds, Agrees bool } `json:"cache"`
}

func explain(t *testing.T, rawURL string) explainJSON {
	t.Helper()
	resp, body := get(t, rawURL)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", rawURL, resp.StatusCode, body)
	}
	return apitest.Decode[explainJSON](t, body)
}

// Explain names the keys the store names, the sets stored, the memberships a lookup answers
// (included wins over excluded), and the metadata of the last poll; by key (any key a lookup
// takes, escaped as a lookup's) and by hash alike.
func TestExplain(t *testing.T) {
	entries := map[string]fixture.Context{}
	for i, k := range trickyKeys {
		entries[k] = fixture.Context{Included: []string{"both.g1", fmt.Sprintf("in-%d.g1", i)}, Excluded: []string{"both.g1", "out.g2"}}
	}
	store := describedStore{memoryStore(t, entries), "launchdarkly"}
	svc := oneService(store)
	svc.Poll(context.Background())
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "redis"}, svc))
	t.Cleanup(srv.Close)
	md, _ := svc.Environments()[0].Status() // the poll's: the embedded store says now at each read
	for i, key := range trickyKeys {
		hash := segments.Hash(key)
		_, body := get(t, srv.URL+"/memberships/"+escapeAll(key)) // also fills the cache: see TestExplainCache
		lookedUp := apitest.Decode[lookup](t, body)
		byKey := explain(t, srv.URL+"/memberships/"+url.PathEscape(key)+"/explain")
		byHash := explain(t, srv.URL+"/explain?contextHash="+url.QueryEscape(hash))
		if allEscaped := explain(t, srv.URL+"/memberships/"+escapeAll(key)+"/explain"); !cmp.Equal(allEscaped, byKey) {
			t.Errorf("%q: escaped as url.PathEscape does and every byte escaped, explained apart:\n%+v\n%+v", key, byKey, allEscaped)
		}
		if byKey.ContextKey == nil || *byKey.ContextKey != key || byHash.ContextKey != nil {
			t.Errorf("%q: contextKey %v by key, %v by hash", key, byKey.ContextKey, byHash.ContextKey)
		}
		byKey.ContextKey = nil
		if diff := cmp.Diff(byKey, byHash); diff != "" {
			t.Errorf("%q: by key and by hash differ (-key +hash):\n%s", key, diff)
		}
		want := explainJSON{ContextHash: hash, Environment: "default", Memberships: lookedUp.Memberships, Status: "HEALTHY"}
		want.Store.Kind, want.Store.Prefix = "redis", new("launchdarkly")
		want.Read.Keys = store.Describe(hash).Keys
		want.Read.Included, want.Read.Excluded = []string{"both.g1", fmt.Sprintf("in-%d.g1", i)}, []string{"out.g2"}
		want.Metadata.SynchronizedOn, want.Metadata.Cursor = md.LastSynchronized.UnixMilli(), md.Cursor
		want.Cache.Holds, want.Cache.Agrees = true, true
		if diff := cmp.Diff(want, byKey); diff != "" {
			t.Errorf("%q (-want +got):\n%s", key, diff)
		}
	}
}

// The cache's part: nothing held before a lookup (and explain does not fill it), the same
// answer held after one, and a held answer that the store no longer gives does not agree.
func TestExplainCache(t *testing.T) {
	store := memoryStore(t, map[string]fixture.Context{"alice": {Included: []string{"beta.g1"}}})
	svc := oneService(store)
	svc.Poll(context.Background())
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "embedded"}, svc))
	t.Cleanup(srv.Close)
	path := srv.URL + "/memberships/alice/explain"
	cacheOf := func() struct{ Holds, Agrees bool } { t.Helper(); return explain(t, path).Cache }

	for range 2 { // the first explain leaves the cache as it was
		if c := cacheOf(); c.Holds || c.Agrees {
			t.Fatalf("before any lookup: %+v", c)
		}
	}
	mustGet(t, srv.URL+"/memberships/alice")
	if c := cacheOf(); !c.Holds || !c.Agrees {
		t.Errorf("after a lookup: %+v, want held and agreeing", c)
	}
	// The data changes without the poller having seen it: the cache still holds the old answer.
	store.Replace(&fixture.Fixture{Contexts: []fixture.Context{{Key: "alice", Hash: segments.Hash("alice"), Included: []string{"gamma.g2"}}}})
	x := explain(t, path)
	if !x.Cache.Holds || x.Cache.Agrees || !cmp.Equal(x.Memberships, map[string]bool{"gamma.g2": true}) {
		t.Errorf("after a change not yet polled: %+v, want held, not agreeing, the store's new answer", x)
	}
}

// A failed read is told as a lookup tells it (STORE_ERROR, an error, no memberships), in a 200;
// a store that cannot name its keys gives its kind only.
func TestExplainStoreError(t *testing.T) {
	srv := newServer(t, failingStore{readErr: errors.New("connection refused by 10.0.0.7:6379")}, handlers.Config{StoreName: "redis"})
	resp, body := get(t, srv.URL+"/memberships/alice/explain")
	x := apitest.Decode[explainJSON](t, body)
	if resp.StatusCode != 200 || x.Status != "STORE_ERROR" || x.Error == "" || x.Memberships != nil || x.Read.Included != nil || x.Cache.Holds {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	if !strings.Contains(x.Error, "connection refused by 10.0.0.7:6379") {
		t.Errorf("error %q, want the read's, as /status gives the poll's", x.Error)
	}
	if x.Store.Kind != "redis" || x.Store.Prefix != nil || x.Read.Keys != nil {
		t.Errorf("a store that does not describe itself: %+v", x)
	}
	invalid := newServer(t, failingStore{readErr: fmt.Errorf("%w: item has no key", segments.ErrInvalidData)}, handlers.Config{StoreName: "dynamodb"})
	if x := explain(t, invalid.URL+"/memberships/alice/explain"); !strings.Contains(x.Error, "item has no key") {
		t.Errorf("invalid data: error %q, want the read's", x.Error)
	}
}

// Explain takes its key or hash as the lookups do: the same 400s with the same messages. An
// empty key is a 400 too (where /memberships/, which no route matches, is a 404).
func TestExplainBadInput(t *testing.T) {
	srv := newServer(t, memoryStore(t, nil), handlers.Config{MaxKeyBytes: 10, StoreName: "embedded"})
	for _, c := range []struct{ lookup, explain string }{
		{"/memberships/" + strings.Repeat("a", 11), "/memberships/" + strings.Repeat("a", 11) + "/explain"},
		{"/memberships/%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9a", "/memberships/%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9a/explain"},
		{"/memberships/%FF", "/memberships/%FF/explain"},
		{"/memberships/a%2F%FF", "/memberships/a%2F%FF/explain"},
		{"/memberships?contextHash=abc", "/explain?contextHash=abc"},
		{"/memberships?contextHash=" + hexSHA256("alice"), "/explain?contextHash=" + hexSHA256("alice")},
		{"/memberships", "/explain"},
		{"/memberships?contextHash=a&contextHash=b", "/explain?contextHash=a&contextHash=b"},
	} {
		lresp, lbody := get(t, srv.URL+c.lookup)
		eresp, ebody := get(t, srv.URL+c.explain)
		if lresp.StatusCode < 400 || eresp.StatusCode != lresp.StatusCode || string(ebody) != string(lbody) {
			t.Errorf("%s: %d %s; %s: %d %s", c.lookup, lresp.StatusCode, lbody, c.explain, eresp.StatusCode, ebody)
		}
	}
	if resp, body := get(t, srv.URL+"/memberships//explain"); resp.StatusCode != 400 || !strings.Contains(string(body), "context key is empty") {
		t.Errorf("an empty key: %d %s", resp.StatusCode, body)
	}
}

// statusDetails is what /status says of an environment's store beyond the status.
type statusDetails struct{ Prefix, LastError, LastErrorAt string }

// detailsShown is each environment's statusDetails in the answer to path with token ("": none),
// lastErrorAt checked to come with lastError and then dropped (its value is the poll's time).
func detailsShown(t *testing.T, svc *segments.Service, cfg handlers.Config, token, path string) map[string]statusDetails {
	t.Helper()
	srv := httptest.NewServer(handlers.New(cfg, svc))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, body := apitest.Do(t, nil, req)
	if resp.StatusCode != 200 {
		t.Fatalf("%s with %q: %d %s", path, token, resp.StatusCode, body)
	}
	shown := map[string]statusDetails{"production": apitest.Decode[statusDetails](t, body)}
	if path == "/status" {
		shown = apitest.Decode[struct{ Environments map[string]statusDetails }](t, body).Environments
	}
	for env, d := range shown {
		if (d.LastErrorAt != "") != (d.LastError != "") {
			t.Errorf("%q %s: %s: lastErrorAt %q beside lastError %q", token, path, env, d.LastErrorAt, d.LastError)
		}
		d.LastErrorAt = ""
		shown[env] = d
	}
	return shown
}

// /status gives its details (the prefix as stored; while unavailable, the last error and
// when) to everyone without tokens; with tokens, only to a caller whose token opens the
// environment, and the rest of the status to every caller.
func TestStatusDetails(t *testing.T) {
	store := &describedSwitchStore{prefix: "team-a"}
	store.set(time.Time{}, errors.New("NOAUTH Authentication required"))
	svc := services(t, segments.Environment{Name: "production", Store: store},
		segments.Environment{Name: "staging", Store: describedStore{memoryStore(t, nil), "team-b"}})
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/tokens", []byte("tok-all\ntok-staging staging\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokens(nil, dir+"/tokens", nil, nil, "production", "staging")
	if err != nil {
		t.Fatal(err)
	}
	failing, staging, none := statusDetails{"team-a", "NOAUTH Authentication required", ""}, statusDetails{Prefix: "team-b"}, statusDetails{}
	open := handlers.Config{StoreName: "redis"}
	withTokens := defended(handlers.Config{StoreName: "redis"}, tokens, "production", "staging")
	for _, c := range []struct {
		cfg         handlers.Config
		token, path string
		want        map[string]statusDetails
	}{
		{open, "", "/status", map[string]statusDetails{"production": failing, "staging": staging}},
		{open, "", "/environments/production/status", map[string]statusDetails{"production": failing}},
		{withTokens, "", "/status", map[string]statusDetails{"production": none, "staging": none}},
		{withTokens, "nope", "/status", map[string]statusDetails{"production": none, "staging": none}},
		{withTokens, "tok-staging", "/status", map[string]statusDetails{"production": none, "staging": staging}},
		{withTokens, "tok-all", "/status", map[string]statusDetails{"production": failing, "staging": staging}},
		{withTokens, "", "/environments/production/status", map[string]statusDetails{"production": none}},
		{withTokens, "tok-staging", "/environments/production/status", map[string]statusDetails{"production": none}},
		{withTokens, "tok-all", "/environments/production/status", map[string]statusDetails{"production": failing}},
	} {
		if got := detailsShown(t, svc, c.cfg, c.token, c.path); !cmp.Equal(got, c.want) {
			t.Errorf("tokens %v, %q %s: %+v, want %+v", c.cfg.Authorized != nil, c.token, c.path, got, c.want)
		}
	}
}

// describedSwitchStore is a switchStore that names its prefix.
type describedSwitchStore struct {
	switchStore
	prefix string
}

func (d *describedSwitchStore) Describe(hash string) segments.StoreView {
	return segments.StoreView{Kind: "redis", Prefix: d.prefix}
}
