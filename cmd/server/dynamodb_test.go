package main

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
)

// motoTurn is the turn of the parallel tests on the shared moto_server: a single Python
// process, whose answers several programs polling it ten times a second, and tests writing
// to it, slow past the lookup timeout the tests of DynamoDB's faults set (dynamoProcess).
var motoTurn = make(chan struct{}, 1)

// parallelOnMoto makes a test that uses the shared moto_server parallel to the others, but not
// to another such test: it waits for its turn, held until the test ends.
func parallelOnMoto(t *testing.T) {
	t.Parallel()
	motoTurn <- struct{}{}
	t.Cleanup(func() { <-motoTurn })
}

// dynamoTable is a table of the test's own on the package's moto_server, with a client of it.
func dynamoTable(t *testing.T) (*awsdynamodb.Client, string) {
	t.Helper()
	c := dynamotest.Client(t, dynamotest.Shared(t).URL)
	return c, dynamotest.Table(t, c)
}

// relayWrite writes memberships under prefix as the Relay Proxy's patch does, then its
// version as lastVersion (after previous), and the synchronization time now.
func relayWrite(t *testing.T, c *awsdynamodb.Client, table, prefix, previous, version string, changes ...dynamotest.Change) {
	t.Helper()
	dynamotest.Patch(t, c, table, prefix, previous, version, changes)
	dynamotest.SetSynchronizedOn(t, c, table, prefix, time.Now().UnixMilli())
}

// dynamoStatus is what /status says of the store.
type dynamoStatus struct {
	Available          bool    `json:"available"`
	Store              string  `json:"store"`
	Table              string  `json:"table"`
	Cursor             *string `json:"cursor"`
	CheckedAt          string  `json:"checkedAt"`
	LastSynchronizedOn int64   `json:"lastSynchronizedOn"`
}

// TestDynamoDBEndToEnd: on a table written as the Relay Proxy writes it (no prefix, the
// default for DynamoDB), lookups by key (keys with /, %, + and spaces), by hash and in a batch
// answer the table's memberships; /status names the store and the table; /readyz is 200. A
// write without a new lastVersion stays hidden by the cache, and one with a new lastVersion
// is answered at the next poll. The Redis-protocol listener serves the same data under the
// SDKs' default Redis prefix, launchdarkly:, to a real go-redis client.
func TestDynamoDBEndToEnd(t *testing.T) { // not parallel: dynamotest.Env
	c, table := dynamoTable(t)
	keys := []string{"alice", "a/b", "100%", "a+b", "with space", "zoë"}
	var changes []dynamotest.Change
	for i, k := range keys {
		changes = append(changes, dynamotest.Change{Hash: segments.Hash(k),
			AddIncluded: []string{"inc-" + strconv.Itoa(i) + ".g1"}, AddExcluded: []string{"exc.g1"}})
	}
	relayWrite(t, c, table, "", "", "v1", changes...)
	dynamotest.Env(t, dynamotest.Shared(t).URL)
	srv := start(t, withRESP(map[string]string{"BIGSEG_DYNAMODB_TABLE": table, "BIGSEG_STATUS_POLL_INTERVAL": "100ms"}))
	if l := srv.logs.wait(t, "using DynamoDB"); l["table"] != table || l["region"] != dynamotest.Region {
		t.Errorf("start-up line: %v", l)
	}

	for i, k := range keys {
		resp, body := srv.get(t, "/memberships/"+url.PathEscape(k))
		want := lookup{ContextKey: k, ContextHash: segments.Hash(k), Status: "HEALTHY",
			Memberships: map[string]bool{"inc-" + strconv.Itoa(i) + ".g1": true, "exc.g1": false}}
		if got := apitest.Decode[lookup](t, body); resp.StatusCode != 200 || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %d %s", k, resp.StatusCode, body)
		}
	}
	resp, body := srv.get(t, "/memberships?contextHash="+url.QueryEscape(segments.Hash("a/b")))
	if got := apitest.Decode[lookup](t, body); resp.StatusCode != 200 || !got.Memberships["inc-1.g1"] {
		t.Errorf("a/b by hash: %d %s", resp.StatusCode, body)
	}
	batch, _ := json.Marshal(map[string][]string{"contextKeys": append(slices.Clone(keys), "nobody")})
	resp, body = srv.post(t, "/memberships", string(batch))
	results := apitest.Decode[struct{ Results []lookup }](t, body).Results
	if resp.StatusCode != 200 || len(results) != len(keys)+1 {
		t.Fatalf("batch: %d %s", resp.StatusCode, body)
	}
	for i, r := range results[:len(keys)] {
		if r.Status != "HEALTHY" || !r.Memberships["inc-"+strconv.Itoa(i)+".g1"] || r.Memberships["exc.g1"] {
			t.Errorf("batch result %d: %+v", i, r)
		}
	}
	if last := results[len(keys)]; last.Status != "HEALTHY" || len(last.Memberships) != 0 {
		t.Errorf("nobody: %+v", last)
	}

	_, body = srv.get(t, "/status")
	st := apitest.Decode[dynamoStatus](t, body)
	if !st.Available || st.Store != "dynamodb" || st.Table != table || st.Cursor == nil || *st.Cursor != "v1" {
		t.Errorf("/status: %s", body)
	}
	if resp, body := srv.get(t, "/readyz"); resp.StatusCode != 200 {
		t.Errorf("/readyz: %d %s", resp.StatusCode, body)
	}

	// A write without a new version: the cached answer stands, poll after poll.
	dynamotest.Patch(t, c, table, "", "v1", "", []dynamotest.Change{{Hash: segments.Hash("alice"), AddIncluded: []string{"hidden.g1"}}})
	polledAfter(t, srv, st.CheckedAt)
	if got := srv.memberships(t, "alice"); got["hidden.g1"] {
		t.Errorf("alice after a write without a new lastVersion: %v, want the cached answer", got)
	}
	// The Relay Proxy's patch sets a new version: the next poll drops the cached answers.
	relayWrite(t, c, table, "", "v1", "v2", dynamotest.Change{Hash: segments.Hash("alice"),
		AddIncluded: []string{"new.g1"}, RemoveIncluded: []string{"inc-0.g1"}})
	waitFor(t, "alice's patch answered", func() bool { return srv.memberships(t, "alice")["new.g1"] })
	want := map[string]bool{"new.g1": true, "hidden.g1": true, "exc.g1": false}
	if got := srv.memberships(t, "alice"); !reflect.DeepEqual(got, want) {
		t.Errorf("alice after the patch: %v, want %v", got, want)
	}

	rc := respClient(t, respAddr(t, srv.logs), goredis.Options{})
	k := respKeys{prefix: "launchdarkly"}
	reads := goRedisReads(rc)
	respPolled(t, reads, k)
	if got, err := reads.get(k.synchronizedOn()); err != nil || got != respStatus(t, srv) || got == "" {
		t.Errorf("GET %s: %q, %v; /status has %q", k.synchronizedOn(), got, err, respStatus(t, srv))
	}
	for key, want := range map[string][2][]string{
		"alice":  {{"hidden.g1", "new.g1"}, {"exc.g1"}},
		"a/b":    {{"inc-1.g1"}, {"exc.g1"}},
		"nobody": {{}, {}},
	} {
		inc, err1 := reads.smembers(k.include(key))
		exc, err2 := reads.smembers(k.exclude(key))
		if err1 != nil || err2 != nil || !slices.Equal(inc, want[0]) || !slices.Equal(exc, want[1]) {
			t.Errorf("%s over RESP: include %v (%v), exclude %v (%v); want %v", key, inc, err1, exc, err2, want)
		}
	}
}

// polledAfter waits for a status poll that began after the one that reported checkedAt.
func polledAfter(t *testing.T, srv *server, checkedAt string) {
	t.Helper()
	seen := 0
	waitFor(t, "two more polls", func() bool {
		_, body := srv.get(t, "/status")
		if at := apitest.Decode[dynamoStatus](t, body).CheckedAt; at != checkedAt {
			checkedAt, seen = at, seen+1
		}
		return seen >= 2
	})
}

// TestDynamoDBEnvironments: environments by prefix in one table, read by one poll each tick:
// each answers its own data, a patch of one drops only its answers, /status names the table
// for each, and the Redis-protocol listener serves each under its own prefix.
func TestDynamoDBEnvironments(t *testing.T) { // not parallel: dynamotest.Env
	c, table := dynamoTable(t)
	alice := segments.Hash("alice")
	for _, p := range []string{"ld-prod", "ld-staging"} {
		relayWrite(t, c, table, p, "", p+"-v1", dynamotest.Change{Hash: alice, AddIncluded: []string{p + ".g1"}})
	}
	dynamotest.Env(t, dynamotest.Shared(t).URL)
	srv := start(t, withRESP(map[string]string{"BIGSEG_DYNAMODB_TABLE": table, "BIGSEG_STATUS_POLL_INTERVAL": "100ms",
		"BIGSEG_ENVIRONMENTS": "production=ld-prod,staging=ld-staging"}))
	get := func(env string) map[string]bool {
		resp, body := srv.get(t, "/environments/"+env+"/memberships/alice")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", env, resp.StatusCode, body)
		}
		return apitest.Decode[lookup](t, body).Memberships
	}
	if p, s := get("production"), get("staging"); !p["ld-prod.g1"] || len(p) != 1 || !s["ld-staging.g1"] || len(s) != 1 {
		t.Errorf("production %v, staging %v", p, s)
	}
	_, body := srv.get(t, "/status")
	all := apitest.Decode[struct{ Environments map[string]dynamoStatus }](t, body).Environments
	for _, env := range []string{"production", "staging"} {
		if st := all[env]; !st.Available || st.Store != "dynamodb" || st.Table != table {
			t.Errorf("/status of %s: %s", env, body)
		}
	}
	// Production's write without a version stays cached; staging's patch is answered.
	dynamotest.Patch(t, c, table, "ld-prod", "ld-prod-v1", "", []dynamotest.Change{{Hash: alice, AddIncluded: []string{"prod-hidden.g1"}}})
	relayWrite(t, c, table, "ld-staging", "ld-staging-v1", "ld-staging-v2", dynamotest.Change{Hash: alice, AddIncluded: []string{"staging-new.g1"}})
	waitFor(t, "staging's patch answered", func() bool { return get("staging")["staging-new.g1"] })
	if p := get("production"); p["prod-hidden.g1"] {
		t.Errorf("production after staging's patch: %v, want its cached answer", p)
	}

	rc := respClient(t, respAddr(t, srv.logs), goredis.Options{})
	reads := goRedisReads(rc)
	for prefix, want := range map[string][]string{"ld-prod": {"ld-prod.g1"}, "ld-staging": {"ld-staging.g1", "staging-new.g1"}} {
		k := respKeys{prefix: prefix}
		if got, err := reads.smembers(k.include("alice")); err != nil || !slices.Equal(got, want) {
			t.Errorf("SMEMBERS %s: %v, %v; want %v", k.include("alice"), got, err, want)
		}
	}
	if err := rc.Get(context.Background(), "launchdarkly:big_segments_synchronized_on").Err(); err == nil {
		t.Error("the default prefix is served while every environment has its own")
	}
}

// The DynamoDB settings: the table beside a Redis setting is refused, naming both; the
// default prefix with DynamoDB is none, and BIGSEG_PREFIX still sets one.
func TestDynamoDBSettings(t *testing.T) {
	t.Parallel()
	for redisVar, val := range map[string]string{"BIGSEG_REDIS_URL": "redis://127.0.0.1:6379",
		"BIGSEG_REDIS_CLUSTER_URL": "redis://127.0.0.1:7000", "BIGSEG_REDIS_SENTINEL_URL": "redis://127.0.0.1:26379?master_name=m"} {
		env := map[string]string{"BIGSEG_DYNAMODB_TABLE": "bigseg", redisVar: val}
		want := "BIGSEG_DYNAMODB_TABLE and " + redisVar + " are both set"
		if _, err := configOf(env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s beside the table: %v, want %q", redisVar, err, want)
		}
	}
	for env, want := range map[string]string{
		"BIGSEG_SEED_FILE":                "BIGSEG_SEED_FILE is for the embedded store",
		"BIGSEG_DYNAMODB_CONSISTENT_READ": "BIGSEG_DYNAMODB_CONSISTENT_READ is set but no DynamoDB table is",
	} {
		vars := map[string]string{"BIGSEG_DYNAMODB_TABLE": "bigseg", env: "false"}
		if env == "BIGSEG_DYNAMODB_CONSISTENT_READ" {
			delete(vars, "BIGSEG_DYNAMODB_TABLE")
		}
		if _, err := configOf(vars); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q", vars, err, want)
		}
	}
	if _, err := configOf(map[string]string{"BIGSEG_DYNAMODB_TABLE": "a b"}); err == nil || !strings.Contains(err.Error(), "BIGSEG_DYNAMODB_TABLE") {
		t.Errorf("a table name with a space: %v", err)
	}
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BIGSEG_DYNAMODB_TABLE": "bigseg"}, ""},
		{map[string]string{"BIGSEG_DYNAMODB_TABLE": "bigseg", "BIGSEG_PREFIX": "ld"}, "ld"},
		{map[string]string{}, "launchdarkly"},
	} {
		cfg, err := configOf(tt.env)
		if err != nil {
			t.Fatal(err)
		}
		if envs, err := cfg.servedEnvironments(); err != nil || len(envs) != 1 || envs[0].Prefix != tt.want {
			t.Errorf("%v: environments %v, %v; want one of prefix %q", tt.env, envs, err, tt.want)
		}
		if p, err := cfg.environmentPrefix(""); err != nil || p != tt.want {
			t.Errorf("%v: load's prefix %q, %v; want %q", tt.env, p, err, tt.want)
		}
	}
	cfg, err := configOf(map[string]string{"BIGSEG_DYNAMODB_TABLE": "bigseg"})
	if err != nil || !cfg.DynamoDBConsistentRead {
		t.Errorf("consistent reads by default: %v, %v", cfg.DynamoDBConsistentRead, err)
	}
	if cfg, err := configOf(map[string]string{"BIGSEG_DYNAMODB_TABLE": "bigseg", "BIGSEG_DYNAMODB_CONSISTENT_READ": "false"}); err != nil || cfg.DynamoDBConsistentRead {
		t.Errorf("BIGSEG_DYNAMODB_CONSISTENT_READ=false: %v, %v", cfg.DynamoDBConsistentRead, err)
	}
}
