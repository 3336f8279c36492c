package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bigseg/bigseg/segments"
)

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	c := defaultConfig()
	c.SeedFile = emptySeedFile // a store is the one setting without a default
	if err := c.validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
}

// With no store configured the program refuses to start, naming the settings of each store:
// served, it would answer "no membership" for everyone while healthy and ready.
func TestNoStoreIsRefused(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"inventory"}} {
		code, _, stderr := runToExit(t, map[string]string{"BIGSEG_ADDR": "127.0.0.1:0"}, args...)
		for _, want := range []string{"no store configured", "BIGSEG_REDIS_URL", "BIGSEG_REDIS_CLUSTER_URL",
			"BIGSEG_REDIS_SENTINEL_URL", "BIGSEG_DYNAMODB_TABLE", "BIGSEG_SEED_FILE"} {
			if code != 1 || !strings.Contains(stderr, want) {
				t.Errorf("no store, %q: exit %d, stderr %q; want exit 1 and a message naming %s", args, code, stderr, want)
			}
		}
	}
}

func TestValidateNamesTheVariables(t *testing.T) {
	t.Parallel()
	c := defaultConfig()
	c.CacheSize, c.MaxConns, c.LogLevel = -1, 0, "loud"
	c.InventoryInterval, c.InventoryReadsPerSecond, c.InventoryMaxSegments = -time.Second, 0, 10001
	c.RedisURL, c.RedisClusterURL = "redis://127.0.0.1:6379", "redis://127.0.0.1:7000"
	err := c.validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"BIGSEG_CACHE_SIZE: must not be negative", "BIGSEG_MAX_CONNS: must be positive",
		"BIGSEG_LOG_LEVEL", "BIGSEG_REDIS_URL and BIGSEG_REDIS_CLUSTER_URL are set", "BIGSEG_INVENTORY_INTERVAL: must be 0 or at least 1s",
		"BIGSEG_INVENTORY_READS_PER_SECOND: must be at least 1", "BIGSEG_INVENTORY_MAX_SEGMENTS: must be 0 to 10000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// Settings that would break a promise: one read slot leaves single lookups none while a batch
// holds it; a cache smaller than 2 an environment would be rounded up past its bound.
func TestValidateSharedBounds(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]map[string]string{
		"BIGSEG_STORE_READS_IN_FLIGHT: must be at least 2":        {"BIGSEG_STORE_READS_IN_FLIGHT": "1"},
		"BIGSEG_CACHE_SIZE: 3 cannot be shared by 2 environments": {"BIGSEG_CACHE_SIZE": "3", "BIGSEG_ENVIRONMENTS": "a=pa,b=pb", "BIGSEG_REDIS_URL": "redis://127.0.0.1:6379"},
	} {
		if _, err := configOf(want); err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%v: %v, want %q", want, err, env)
		}
	}
	if _, err := configOf(map[string]string{"BIGSEG_CACHE_SIZE": "4", "BIGSEG_ENVIRONMENTS": "a=pa,b=pb", "BIGSEG_REDIS_URL": "redis://127.0.0.1:6379"}); err != nil {
		t.Errorf("2 each: %v", err)
	}
}

// Timeouts that cannot hold together are refused at start, naming both sides: a lookup timeout
// past the write timeout would have lookups answered with nothing at all.
func TestTimeoutsThatCannotHoldAreRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BIGSEG_LOOKUP_TIMEOUT": "16s"},
			"BIGSEG_LOOKUP_TIMEOUT + BIGSEG_BODY_READ_TIMEOUT (16s + 2s) must be less than BIGSEG_WRITE_TIMEOUT (15s)"},
		{map[string]string{"BIGSEG_LOOKUP_TIMEOUT": "10s", "BIGSEG_WRITE_TIMEOUT": "12s"},
			"(10s + 2s) must be less than BIGSEG_WRITE_TIMEOUT (12s)"},
		{map[string]string{"BIGSEG_LOOKUP_TIMEOUT": "9223372035s"}, // a sum past time.Duration's limit
			"must be less than BIGSEG_WRITE_TIMEOUT (15s)"},
	} {
		env := map[string]string{"BIGSEG_ADDR": "127.0.0.1:0", "BIGSEG_SEED_FILE": emptySeedFile}
		for k, v := range tt.env {
			env[k] = v
		}
		if code, _, stderr := runToExit(t, env); code != 1 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and %q", tt.env, code, stderr, tt.want)
		}
	}
	c := defaultConfig()
	c.SeedFile, c.LookupTimeout, c.WriteTimeout = emptySeedFile, 16*time.Second, time.Minute
	if err := c.validate(); err != nil {
		t.Errorf("a 16s lookup timeout with a 1m write timeout: %v", err)
	}
}

func TestServed(t *testing.T) {
	t.Parallel()
	c := defaultConfig()
	envs, err := c.servedEnvironments()
	if err != nil || len(envs) != 1 || envs[0] != (segments.Environment{Name: "default", Prefix: c.Prefix}) {
		t.Errorf("no BIGSEG_ENVIRONMENTS: %v, %v; want the default environment of BIGSEG_PREFIX", envs, err)
	}
	c.Environments = []string{"production=ld-prod", "staging=ld-staging"}
	envs, err = c.servedEnvironments()
	if err != nil || len(envs) != 2 || envs[1] != (segments.Environment{Name: "staging", Prefix: "ld-staging"}) {
		t.Errorf("servedEnvironments = %v, %v", envs, err)
	}
	for _, bad := range [][]string{{"a=x", "a=y"}, {"a=x", "b=x"}, {"a=x", ""}, {"a/b=x"}, {"Prod=x"}, {"a="}, {"a=x y"}} {
		c.Environments = bad
		if _, err := c.servedEnvironments(); err == nil || !strings.Contains(err.Error(), "BIGSEG_ENVIRONMENTS: pair") {
			t.Errorf("%q: %v, want an error naming the pair", bad, err)
		}
	}
}

// With DynamoDB an environment may have the empty prefix, LaunchDarkly's default there, but
// not beside launchdarkly, which the Redis-protocol listener serves it as.
func TestServedEmptyPrefixOnDynamoDB(t *testing.T) {
	t.Parallel()
	c := defaultConfig()
	c.DynamoDBTable = "bigseg"
	c.Environments = []string{"production=", "staging=ld-staging"}
	envs, err := c.servedEnvironments()
	if err != nil || len(envs) != 2 || envs[0] != (segments.Environment{Name: "production"}) {
		t.Errorf("servedEnvironments = %v, %v; want production with no prefix", envs, err)
	}
	for _, bad := range [][]string{{"a=", "b=launchdarkly"}, {"a=launchdarkly", "b="}, {"a=", "b="}} {
		c.Environments = bad
		if _, err := c.servedEnvironments(); err == nil || !strings.Contains(err.Error(), "BIGSEG_ENVIRONMENTS: pair 2") {
			t.Errorf("%q: %v, want an error naming the second pair", bad, err)
		}
	}
}

func TestEnvironmentPrefix(t *testing.T) {
	t.Parallel()
	c := defaultConfig()
	if p, err := c.environmentPrefix(""); err != nil || p != c.Prefix {
		t.Errorf("one environment: %q, %v", p, err)
	}
	c.Environments = []string{"production=ld-prod", "staging=ld-staging"}
	if p, err := c.environmentPrefix("staging"); err != nil || p != "ld-staging" {
		t.Errorf("staging: %q, %v", p, err)
	}
	if _, err := c.environmentPrefix(""); err == nil || !strings.Contains(err.Error(), "production, staging") {
		t.Errorf("several environments, none named: %v", err)
	}
	if _, err := c.environmentPrefix("qa"); err == nil || !strings.Contains(err.Error(), `no environment "qa"`) {
		t.Errorf("an unknown environment: %v", err)
	}
}

func TestUnknownVariablesInEnviron(t *testing.T) {
	t.Parallel()
	err := unknownVariables([]string{"PATH=/bin", "BIGSEG_REDIS_ULR=redis://x", "BIGSEG_ADDR=:1"})
	if err == nil || !strings.Contains(err.Error(), "BIGSEG_REDIS_ULR names no setting: did you mean BIGSEG_REDIS_URL?") {
		t.Errorf("a misspelt setting: %v", err)
	}
	if err := unknownVariables([]string{"BIGSEG_SERVICE_HOST=10.0.0.1", "BIGSEG_TEST_X=1", "BIGSEG_CACHE_TTL=1s", "BIGSEG_CACHESIZE="}); err != nil {
		t.Errorf("Kubernetes' and the tests' variables: %v", err)
	}
}

// Asking a command for its usage is not a failure: the process exits 0, with no settings at
// all. A flag it does not know still exits 1.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"load", "-h"}, {"load", "--help"}, {"load", "file.json", "-h"},
		{"healthcheck", "-h"}, {"healthcheck", "--help"}, {"inventory", "-h"}, {"load", "--bogus"}, {"healthcheck", "--bogus"}, {"inventory", "--bogus"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runToExit(t, nil, args...)
			if bogus := strings.HasSuffix(args[len(args)-1], "bogus"); bogus && code != 1 {
				t.Errorf("exit %d, want 1", code)
			} else if !bogus && (code != 0 || !strings.Contains(stdout+stderr, "Usage")) {
				t.Errorf("exit %d, output %q; want exit 0 and the usage", code, stdout+stderr)
			}
		})
	}
}

// The limits that are no settings of their own follow from the settings they derive from.
func TestDerivedLimits(t *testing.T) {
	t.Parallel()
	c, err := configOf(map[string]string{"BIGSEG_BODY_READ_TIMEOUT": "3s", "BIGSEG_MAX_CONNS": "100", "BIGSEG_LOOKUP_TIMEOUT": "2s", "BIGSEG_MAX_BATCH": "50", "BIGSEG_MAX_KEY_BYTES": "100",
		"BIGSEG_LOG_LEVEL": "DEBUG"})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.ReadHeaderTimeout, c.ReadTimeout, c.RESPReadTimeout, c.RESPMaxConns, c.IdleTimeout, c.MaxHeaderBytes, c.RESPIdleTimeout, c.MaxBatchRefs, c.MaxStreams, c.MaxBodyBytes}
	want := []any{6 * time.Second, 10 * time.Second, 6 * time.Second, 100, 2 * time.Minute, 16 << 10, time.Duration(0), 5000, 50, int64(50*124 + 1024)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("derived %v, want %v", got, want)
	}
}

// An empty variable counts as unset: the default holds (main changes no variable).
func TestEmptyVariableCountsAsUnset(t *testing.T) {
	c, err := configOf(map[string]string{"BIGSEG_CACHE_SIZE": "", "BIGSEG_LOOKUP_TIMEOUT": "", "BIGSEG_PREFIX": ""})
	if d := defaultConfig(); err != nil || c.CacheSize != d.CacheSize || c.LookupTimeout != d.LookupTimeout || c.Prefix != d.Prefix {
		t.Errorf("empty variables: %v, cache size %d, lookup timeout %s, prefix %q; want the defaults", err, c.CacheSize, c.LookupTimeout, c.Prefix)
	}
	if _, err := configOf(map[string]string{"BIGSEG_CACHE_SIZE": "many"}); err == nil || !strings.Contains(err.Error(), `BIGSEG_CACHE_SIZE="many": not a valid int`) {
		t.Errorf("a bad integer: %v", err)
	}
}
