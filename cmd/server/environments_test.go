package main

import (
	"context"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
)

// threeEnvironments seeds production and staging under prefixes of their own on the shared
// Redis, alice in a segment of each's, and leaves qa never synchronized; it returns the
// environment settings and the environments' prefixes.
func threeEnvironments(t *testing.T) (map[string]string, map[string]string) {
	t.Helper()
	c := redistest.Client(t)
	base := redistest.Prefix(t, c)
	prefixes := map[string]string{}
	var pairs []string
	for _, name := range []string{"production", "staging", "qa"} {
		prefix := base + ":" + name
		prefixes[name] = prefix
		pairs = append(pairs, name+"="+prefix)
		if name != "qa" {
			seedRedis(t, c, prefix, map[string][2][]string{"alice": {{name + ".g1"}}}, time.Now())
			c.Set(context.Background(), cursorKey(prefix), "v1", 0)
		}
	}
	return map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_ENVIRONMENTS": strings.Join(pairs, ","),
		"BIGSEG_STATUS_POLL_INTERVAL": "200ms", "BIGSEG_READY_REQUIRES_FRESH": "true"}, prefixes
}

// TestEnvironmentsEndToEnd: three environments on one Redis each answer their own data, by
// key, by hash and in a batch; a Relay-style patch in one is answered there at its next poll,
// while the others keep their cached answers; qa, never synchronized, answers STALE and keeps
// /readyz 503, naming it; made-up environment names add no metric series.
func TestEnvironmentsEndToEnd(t *testing.T) {
	t.Parallel()
	env, prefixes := threeEnvironments(t)
	srv := start(t, env)
	for name, want := range map[string]map[string]bool{"production": {"production.g1": true}, "staging": {"staging.g1": true}, "qa": {}} {
		base := "/environments/" + name
		for _, path := range []string{base + "/memberships/alice", base + "/memberships?contextHash=" + url.QueryEscape(segments.Hash("alice"))} {
			resp, body := srv.get(t, path)
			got := apitest.Decode[lookup](t, body)
			wantStatus := map[bool]string{true: "STALE", false: "HEALTHY"}[name == "qa"]
			if resp.StatusCode != 200 || !reflect.DeepEqual(got.Memberships, want) || got.Status != wantStatus {
				t.Errorf("%s: %d %s, want %v %s", path, resp.StatusCode, body, want, wantStatus)
			}
		}
		resp, body := srv.post(t, base+"/memberships", `{"contextKeys":["alice"]}`)
		if r := apitest.Decode[struct{ Results []lookup }](t, body).Results; resp.StatusCode != 200 || !reflect.DeepEqual(r[0].Memberships, want) {
			t.Errorf("%s batch: %d %s", name, resp.StatusCode, body)
		}
	}
	resp, body := srv.get(t, "/readyz")
	if resp.StatusCode != 503 || !strings.Contains(string(body), "qa: the Big Segment data is stale") || strings.Contains(string(body), "production") {
		t.Errorf("/readyz with qa never synchronized: %d %s", resp.StatusCode, body)
	}
	if resp, body := srv.get(t, "/memberships/alice"); resp.StatusCode != 404 || !strings.Contains(string(body), "production, staging, qa") {
		t.Errorf("an unscoped lookup with three environments: %d %s", resp.StatusCode, body)
	}

	// The store reads' durations are not by environment; the lookups answered from the store are.
	reads := func(name string) float64 {
		return srv.value(t, "bigseg_membership_lookups_total", "environment", name, "status", "HEALTHY", "source", "store")
	}
	before := map[string]float64{"production": reads("production"), "staging": reads("staging")}
	c := redistest.Client(t)
	relayPatch(t, c, prefixes["production"], "v2",
		map[string][]string{"alice": {"production.g2"}}, map[string][]string{"alice": {"production.g1"}})
	waitFor(t, "production's poll that sees the new cursor", func() bool {
		return srv.value(t, "bigseg_cache_invalidations_total", "environment", "production") == 1
	})
	if got := apitest.Decode[lookup](t, mustGet(t, srv, "/environments/production/memberships/alice")).Memberships; !got["production.g2"] || got["production.g1"] {
		t.Errorf("production after its patch: %v", got)
	}
	if got := apitest.Decode[lookup](t, mustGet(t, srv, "/environments/staging/memberships/alice")).Memberships; !got["staging.g1"] {
		t.Errorf("staging after production's patch: %v", got)
	}
	if reads("production") != before["production"]+1 || reads("staging") != before["staging"] ||
		srv.value(t, "bigseg_cache_invalidations_total", "environment", "staging") != 0 {
		t.Errorf("lookups from the store after production's patch: production %v (was %v), staging %v (was %v); want one for production only",
			reads("production"), before["production"], reads("staging"), before["staging"])
	}

	series := len(srv.scrape(t)["bigseg_http_requests_total"].Metric)
	for _, name := range []string{"made-up", "other", "x1", "%2e%2e"} {
		srv.get(t, "/environments/"+name+"/memberships/alice")
	}
	if n := len(srv.scrape(t)["bigseg_http_requests_total"].Metric); n > series+1 { // one new code, 404, of one route
		t.Errorf("made-up environments added %d series", n-series)
	}
	for _, f := range []string{"bigseg_store_available", "bigseg_membership_lookups_total"} {
		for _, m := range srv.scrape(t)[f].Metric {
			for _, l := range m.Label {
				if l.GetName() == "environment" && l.GetValue() != "production" && l.GetValue() != "staging" && l.GetValue() != "qa" {
					t.Errorf("%s has environment=%q", f, l.GetValue())
				}
			}
		}
	}
}

func mustGet(t *testing.T, srv *server, path string) []byte {
	t.Helper()
	resp, body := srv.get(t, path)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
	}
	return body
}

// Settings of BIGSEG_ENVIRONMENTS that cannot work stop the start with a message naming the
// pair at fault.
func TestEnvironmentsSettings(t *testing.T) {
	t.Parallel()
	url := "redis://127.0.0.1:6379"
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BIGSEG_REDIS_URL": url, "BIGSEG_ENVIRONMENTS": "prod=a,prod=b"}, `pair 2 ("prod=b"): the name prod is given twice`},
		{map[string]string{"BIGSEG_REDIS_URL": url, "BIGSEG_ENVIRONMENTS": "prod=a,staging=a"}, `pair 2 ("staging=a"): the prefix a is given twice`},
		{map[string]string{"BIGSEG_REDIS_URL": url, "BIGSEG_ENVIRONMENTS": "prod=a,,staging=b"}, `pair 2 (""): empty`},
		{map[string]string{"BIGSEG_REDIS_URL": url, "BIGSEG_ENVIRONMENTS": "pro/d=a"}, `pair 1 ("pro/d=a"): a name is lower-case letters`},
		{map[string]string{"BIGSEG_REDIS_URL": url, "BIGSEG_ENVIRONMENTS": "Prod=a"}, `a name is lower-case`},
		{map[string]string{"BIGSEG_REDIS_URL": url, "BIGSEG_ENVIRONMENTS": "prod"}, `pair 1 ("prod"): want name=prefix`},
		{map[string]string{"BIGSEG_REDIS_URL": url, "BIGSEG_ENVIRONMENTS": "prod=a", "BIGSEG_PREFIX": "b"}, "BIGSEG_PREFIX and BIGSEG_ENVIRONMENTS are both set"},
		{map[string]string{"BIGSEG_ENVIRONMENTS": "prod=a,staging=b"}, "the embedded store serves one environment"},
	} {
		err := runRefused(context.Background(), c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.env, err, c.want)
		}
	}
}

// server load writes the environment named, and its cursor only.
func TestLoadAnEnvironment(t *testing.T) {
	t.Parallel()
	env, prefixes := threeEnvironments(t)
	out, err := loadFile(t, env, "--environment", "qa", "../../examples/memberships.json")
	if err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}
	c := redistest.Client(t)
	ctx := context.Background()
	if got, _ := c.Get(ctx, cursorKey(prefixes["qa"])).Result(); got == "" {
		t.Error("qa has no cursor after its load")
	}
	if got, _ := c.Get(ctx, cursorKey(prefixes["production"])).Result(); got != "v1" {
		t.Errorf("production's cursor after qa's load: %q", got)
	}
	if n, _ := c.SCard(ctx, includeKey(prefixes["qa"], "alice")).Result(); n != 2 {
		t.Errorf("qa's alice after its load: %d refs", n)
	}
	if _, err := loadFile(t, env, "../../examples/memberships.json"); err == nil || !strings.Contains(err.Error(), "give --environment, one of production, staging, qa") {
		t.Errorf("load without --environment: %v", err)
	}
}

// Over the Redis-protocol listener, the prefix an SDK reads selects its environment, and a
// token scoped to staging is refused on production.
func TestEnvironmentsOverRESP(t *testing.T) {
	t.Parallel()
	env, prefixes := threeEnvironments(t)
	tokens := t.TempDir() + "/tokens"
	writeFile(t, tokens, "tok-staging staging\n")
	env["BIGSEG_RESP_ADDR"], env["BIGSEG_API_TOKENS_FILE"] = "127.0.0.1:0", tokens
	srv := start(t, env)
	rc := goredis.NewClient(&goredis.Options{Addr: respAddr(t, srv.logs), Password: "tok-staging", MaxRetries: -1})
	defer rc.Close()
	ctx := context.Background()
	if got, err := rc.SMembers(ctx, includeKey(prefixes["staging"], "alice")).Result(); err != nil || !reflect.DeepEqual(got, []string{"staging.g1"}) {
		t.Errorf("staging over RESP: %v %v", got, err)
	}
	if err := rc.SMembers(ctx, includeKey(prefixes["production"], "alice")).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM this token does not open environment production") {
		t.Errorf("production with a staging token: %v", err)
	}
	if err := rc.Get(ctx, "unknown:big_segments_synchronized_on").Err(); err == nil || !strings.Contains(err.Error(), "prefixes") {
		t.Errorf("a prefix not served: %v", err)
	}
}
