package handlers_test

import (
	"bufio"
	"context"
	"errors"
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
)

// threeEnvironments serves production and staging, each with alice in a segment of its own,
// and qa, never synchronized.
func threeEnvironments(t *testing.T, cfg handlers.Config) *httptest.Server {
	t.Helper()
	svc := services(t,
		segments.Environment{Name: "production", Store: memoryStore(t, map[string]fixture.Context{"alice": {Included: []string{"prod.g1"}}})},
		segments.Environment{Name: "staging", Store: memoryStore(t, map[string]fixture.Context{"alice": {Included: []string{"staging.g1"}}})},
		segments.Environment{Name: "qa", Store: neverSynchronized{}})
	srv := httptest.NewServer(handlers.New(cfg, svc))
	t.Cleanup(srv.Close)
	return srv
}

// services is the service of envs, polled once.
func services(t *testing.T, envs ...segments.Environment) *segments.Service {
	t.Helper()
	svc, err := segments.New(envs, segments.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Poll(context.Background())
	return svc
}

// neverSynchronized is a store that answers, but was never synchronized.
type neverSynchronized struct{ emptyStore }

func (neverSynchronized) Metadata(context.Context) (segments.Metadata, error) {
	return segments.Metadata{}, nil
}

type emptyStore struct{}

func (emptyStore) Memberships(_ context.Context, hashes []string) []segments.Read {
	return make([]segments.Read, len(hashes))
}

func (emptyStore) Metadata(context.Context) (segments.Metadata, error) {
	return segments.Metadata{LastSynchronized: time.Now()}, nil
}

// Each environment answers its own data, by key, by hash and in a batch; qa, never
// synchronized, answers STALE.
func TestEnvironmentsAnswerTheirOwnData(t *testing.T) {
	srv := threeEnvironments(t, handlers.Config{StoreName: "embedded"})
	h := url.QueryEscape(segments.Hash("alice"))
	for env, want := range map[string]map[string]bool{"production": {"prod.g1": true}, "staging": {"staging.g1": true}, "qa": {}} {
		base := srv.URL + "/environments/" + env
		for _, path := range []string{"/memberships/alice", "/memberships?contextHash=" + h} {
			resp, body := get(t, base+path)
			got := apitest.Decode[lookup](t, body)
			if resp.StatusCode != 200 || !cmp.Equal(got.Memberships, want) {
				t.Errorf("%s%s: %d %s, want %v", env, path, resp.StatusCode, body, want)
			}
			if wantStatus := map[bool]string{true: "STALE", false: "HEALTHY"}[env == "qa"]; got.Status != wantStatus {
				t.Errorf("%s%s: status %s, want %s", env, path, got.Status, wantStatus)
			}
		}
		resp, body := post(t, base+"/memberships", "application/json", `{"contextKeys":["alice"]}`)
		if results := apitest.Decode[struct{ Results []lookup }](t, body).Results; resp.StatusCode != 200 || !cmp.Equal(results[0].Memberships, want) {
			t.Errorf("%s batch: %d %s", env, resp.StatusCode, body)
		}
	}
}

// With several environments, an unscoped lookup or an unknown environment is a 404 naming
// the environments served: never one environment's data for another's request.
func TestEnvironmentsNotSaid(t *testing.T) {
	srv := threeEnvironments(t, handlers.Config{})
	for _, path := range []string{"/memberships/alice", "/memberships?contextHash=" + url.QueryEscape(segments.Hash("alice")),
		"/environments/prod/memberships/alice", "/environments/prod/status", "/environments/prod/status/stream"} {
		resp, body := get(t, srv.URL+path)
		if resp.StatusCode != 404 || !strings.Contains(string(body), "production, staging, qa") {
			t.Errorf("%s: %d %s, want a 404 naming the environments", path, resp.StatusCode, body)
		}
	}
	for path, hint := range map[string]string{"/memberships/alice": "/environments/production/memberships/alice",
		"/environments//memberships/alice": "/environments/production/memberships/alice"} {
		if resp, body := get(t, srv.URL+path); resp.StatusCode != 404 || !strings.Contains(string(body), "such as "+hint+`"`) {
			t.Errorf("%s: %d %s, want a 404 that suggests %s", path, resp.StatusCode, body, hint)
		}
	}
	resp, body := post(t, srv.URL+"/memberships", "application/json", `{"contextKeys":["alice"]}`)
	if resp.StatusCode != 404 {
		t.Errorf("unscoped batch: %d %s", resp.StatusCode, body)
	}
	if resp, body := get(t, srv.URL+"/environments/%2e%2e/memberships/alice"); resp.StatusCode != 404 || strings.Contains(string(body), "..") {
		t.Errorf("a made-up environment: %d %s, want a 404 that does not echo it", resp.StatusCode, body)
	}
}

// /status lists every environment, and /environments/{env}/status is one's.
func TestEnvironmentsStatusAndReadiness(t *testing.T) {
	srv := threeEnvironments(t, handlers.Config{StoreName: "embedded"})
	_, body := get(t, srv.URL+"/status")
	all := apitest.Decode[struct {
		Environments map[string]struct {
			Stale       bool
			Environment string
		}
	}](t, body).Environments
	if len(all) != 3 || !all["qa"].Stale || all["production"].Stale || all["staging"].Environment != "staging" {
		t.Errorf("/status: %s", body)
	}
	_, body = get(t, srv.URL+"/environments/qa/status")
	if one := apitest.Decode[struct{ Stale bool }](t, body); !one.Stale {
		t.Errorf("/environments/qa/status: %s", body)
	}
}

func TestEnvironmentsReadinessNamesThoseNotReady(t *testing.T) {
	svc := services(t, segments.Environment{Name: "production", Store: emptyStore{}},
		segments.Environment{Name: "staging", Store: failingStore{metaErr: errors.New("down")}})
	srv := httptest.NewServer(handlers.New(handlers.Config{}, svc))
	defer srv.Close()
	resp, body := get(t, srv.URL+"/readyz")
	if resp.StatusCode != 503 || !strings.Contains(string(body), "staging: the Big Segment store is unavailable") || strings.Contains(string(body), "production") {
		t.Errorf("/readyz: %d %s, want 503 naming staging only", resp.StatusCode, body)
	}
}

// The unscoped stream of several environments sends each one's status, naming it.
func TestEnvironmentsStream(t *testing.T) {
	srv := threeEnvironments(t, handlers.Config{StoreName: "embedded"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/status/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for len(seen) < 3 && sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			apitest.CheckSchema(t, "Status", []byte(data))
			seen[apitest.Decode[struct{ Environment string }](t, []byte(data)).Environment] = true
		}
	}
	if !seen["production"] || !seen["staging"] || !seen["qa"] {
		t.Errorf("events named %v, want every environment", seen)
	}
}

// A token scoped to staging opens staging only; one of BIGSEG_API_TOKENS opens every one.
func TestScopedTokens(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/tokens", []byte("tok-all\ntok-staging staging\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokens(nil, dir+"/tokens", nil, nil, "production", "staging", "qa")
	if err != nil {
		t.Fatal(err)
	}
	srv := threeEnvironments(t, defended(handlers.Config{}, tokens, "production", "staging", "qa"))
	for _, c := range []struct {
		token, path string
		want        int
	}{
		{"tok-staging", "/environments/staging/memberships/alice", 200},
		{"tok-staging", "/environments/production/memberships/alice", 403},
		{"tok-staging", "/environments/production/status/stream", 403},
		{"tok-all", "/environments/production/memberships/alice", 200},
		{"nope", "/environments/staging/memberships/alice", 401},
		{"tok-staging", "/environments/" + strings.Repeat("a", 5000) + "/memberships/alice", 403},
		{"tok-staging", "/environments/production%2F..%2Fstaging/memberships/alice", 403},
		{"tok-all", "/environments/" + strings.Repeat("a", 5000) + "/memberships/alice", 404},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		if c.want == 200 && strings.Contains(c.path, "stream") {
			continue
		}
		resp, body := apitest.Do(t, nil, req)
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.token, c.path, resp.StatusCode, body, c.want)
		}
		// A name that no environment could have is not repeated back, at any length.
		if len(body) > 200 || strings.Contains(string(body), "..") {
			t.Errorf("%s %.40s...: the answer repeats the path: %.100s", c.token, c.path, body)
		}
	}
}
