package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/redis"
)

// relayPatch applies a change as the Relay Proxy applies a Big Segments patch: WATCH the lock,
// then one MULTI/EXEC that sets the lock and the cursor and changes the sets, then sets
// synchronized_on.
func relayPatch(t *testing.T, c *goredis.Client, prefix, cursor string, add, remove map[string][]string) {
	t.Helper()
	ctx := context.Background()
	store := redis.New(nil, prefix)
	lock := prefix + ":big_segments_lock"
	err := c.Watch(ctx, func(tx *goredis.Tx) error {
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Set(ctx, lock, "", 0)
			p.Set(ctx, cursorKey(prefix), cursor, 0)
			for key, refs := range add {
				p.SAdd(ctx, store.IncludeKey(segments.Hash(key)), anys(refs)...)
			}
			for key, refs := range remove {
				p.SRem(ctx, store.IncludeKey(segments.Hash(key)), anys(refs)...)
			}
			return nil
		})
		return err
	}, lock)
	if err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, synchronizedOnKey(prefix), strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// memberships looks a key up and returns its memberships.
func (s *server) memberships(t *testing.T, key string) map[string]bool {
	t.Helper()
	resp, body := s.get(t, "/memberships/"+key)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", key, resp.StatusCode, body)
	}
	return apitest.Decode[lookup](t, body).Memberships
}

// freshnessEnv: a cache that would hide a change for an hour, and quick polls.
func freshnessEnv(prefix string) map[string]string {
	return map[string]string{"BIGSEG_PREFIX": prefix, "BIGSEG_CACHE_TTL": "1h",
		"BIGSEG_STATUS_POLL_INTERVAL": "200ms"}
}

// A patch written as the Relay Proxy writes it is answered by every instance at its next
// poll, whatever its cache TTL: including a context whose last segment was removed.
func TestRelayPatchAnsweredByEveryInstance(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	seedRedis(t, c, prefix, map[string][2][]string{"alice": {{"old.g1"}}, "bob": {{"gone.g1"}}}, time.Now())
	c.Set(context.Background(), cursorKey(prefix), "v1", 0)
	env := freshnessEnv(prefix)
	env["BIGSEG_REDIS_URL"] = redistest.URL(t)
	instances := []*server{start(t, env), start(t, env)}
	for _, srv := range instances {
		for range 2 {
			srv.memberships(t, "alice")
			srv.memberships(t, "bob")
		}
		if hits := srv.value(t, "bigseg_membership_lookups_total", "status", "HEALTHY", "source", "cache"); hits < 2 {
			t.Fatalf("%v cached answers before the patch, want 2", hits)
		}
	}
	relayPatch(t, c, prefix, "v2", map[string][]string{"alice": {"new.g1"}}, map[string][]string{"alice": {"old.g1"}, "bob": {"gone.g1"}})
	committed := time.Now()
	for i, srv := range instances {
		waitFor(t, "the poll that sees the new cursor", func() bool {
			return srv.value(t, "bigseg_cache_invalidations_total") == 1
		})
		if got := srv.memberships(t, "alice"); !reflect.DeepEqual(got, map[string]bool{"new.g1": true}) {
			t.Errorf("instance %d: alice after the patch: %v", i, got)
		}
		if got := srv.memberships(t, "bob"); len(got) != 0 {
			t.Errorf("instance %d: bob, whose last segment was removed: %v, want {}", i, got)
		}
		t.Logf("instance %d answered the patch %v after its commit (polls every 200ms)", i, time.Since(committed).Round(time.Millisecond))
	}
}

// The synchronizer's idle heartbeat changes synchronized_on only: it invalidates nothing, and
// cached answers keep being served.
func TestIdleHeartbeatKeepsTheCache(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	seedRedis(t, c, prefix, map[string][2][]string{"alice": {{"a.g1"}}}, time.Now())
	c.Set(context.Background(), cursorKey(prefix), "v1", 0)
	env := freshnessEnv(prefix)
	env["BIGSEG_REDIS_URL"] = redistest.URL(t)
	srv := start(t, env)
	srv.memberships(t, "alice")
	reads := srv.value(t, "bigseg_store_request_duration_seconds", "operation", "memberships")
	for range 5 {
		polls := srv.value(t, "bigseg_store_status_polls_total", "result", "success")
		c.Set(context.Background(), synchronizedOnKey(prefix), strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
		waitFor(t, "a poll after the heartbeat", func() bool {
			return srv.value(t, "bigseg_store_status_polls_total", "result", "success") > polls
		})
		srv.memberships(t, "alice")
	}
	if got := srv.value(t, "bigseg_store_request_duration_seconds", "operation", "memberships") - reads; got != 0 {
		t.Errorf("%v store reads over 5 heartbeats, want 0: every answer from the cache", got)
	}
	if got := srv.value(t, "bigseg_cache_invalidations_total"); got != 0 {
		t.Errorf("%v invalidations, want 0", got)
	}
}

// "server load" writes a new cursor after its data: a running instance answers the loaded
// data at its next poll, without a restart.
func TestLoadIsAnsweredByARunningInstance(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	env := freshnessEnv(prefix)
	env["BIGSEG_REDIS_URL"] = redistest.URL(t)
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.json"), filepath.Join(dir, "second.json")
	writeFile(t, first, `{"contexts": {"alice": {"included": ["first.g1"]}}}`)
	writeFile(t, second, `{"contexts": {"alice": {"included": ["second.g1"]}}}`)
	if out, err := loadFile(t, env, first); err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}
	srv := start(t, env)
	for range 2 {
		if got := srv.memberships(t, "alice"); !got["first.g1"] {
			t.Fatalf("alice: %v", got)
		}
	}
	if out, err := loadFile(t, env, "--replace", second); err != nil {
		t.Fatalf("second load: %v\n%s", err, out)
	}
	waitFor(t, "the poll that sees the load", func() bool { return srv.value(t, "bigseg_cache_invalidations_total") == 1 })
	if got := srv.memberships(t, "alice"); !reflect.DeepEqual(got, map[string]bool{"second.g1": true}) {
		t.Errorf("alice after the second load: %v", got)
	}
}

// SIGHUP reloads the embedded store's fixture: a change, answered at once.
func TestSighupReloadsTheEmbeddedStore(t *testing.T) {
	t.Parallel()
	seed := filepath.Join(t.TempDir(), "seed.json")
	writeFile(t, seed, `{"cursor": "v1", "contexts": {"alice": {"included": ["before.g1"]}}}`)
	p := startProcess(t, map[string]string{"BIGSEG_SEED_FILE": seed, "BIGSEG_LOG_LEVEL": "info", "BIGSEG_CACHE_TTL": "1h"})
	get := func(path string) []byte {
		resp, err := http.Get(p.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		return b[:n]
	}
	for range 2 {
		if got := apitest.Decode[lookup](t, get("/memberships/alice")).Memberships; !got["before.g1"] {
			t.Fatalf("alice: %v", got)
		}
	}
	if err := os.WriteFile(seed, []byte(`{"cursor": "v2", "contexts": {"alice": {"included": ["after.g1"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p.signal(t, syscall.SIGHUP)
	p.logs.wait(t, "SIGHUP: reloaded the embedded store")
	if got := apitest.Decode[lookup](t, get("/memberships/alice")).Memberships; !reflect.DeepEqual(got, map[string]bool{"after.g1": true}) {
		t.Errorf("alice after SIGHUP: %v", got)
	}
	if st := apitest.Decode[map[string]any](t, get("/status")); st["cursor"] != "v2" {
		t.Errorf("/status after SIGHUP: %v", st)
	}
	// A fixture that no longer parses is refused; the data loaded before is still served.
	os.WriteFile(seed, []byte(`{"contexts": `), 0o600)
	p.signal(t, syscall.SIGHUP)
	p.logs.wait(t, "SIGHUP: reload failed; still serving the data loaded before")
	if got := apitest.Decode[lookup](t, get("/memberships/alice")).Memberships; !got["after.g1"] {
		t.Errorf("alice after a failed reload: %v", got)
	}
}
