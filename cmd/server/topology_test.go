package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/apitest"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/internal/settings"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/redis"
)

// loadFile runs "server load" with the given environment.
func loadFile(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runProgram(context.Background(), env, &out, &errOut, append([]string{"load"}, args...)...)
	return out.String() + errOut.String(), err
}

// expectFixtureServed reads every context of the fixture back through HTTP and compares.
func expectFixtureServed(t *testing.T, srv *server, path string) {
	t.Helper()
	f, err := fixture.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Contexts {
		want := map[string]bool{}
		for _, r := range c.Excluded {
			want[r] = false
		}
		for _, r := range c.Included {
			want[r] = true
		}
		p := "/memberships?contextHash=" + url.QueryEscape(c.Hash)
		if c.Key != "" {
			p = "/memberships/" + url.PathEscape(c.Key)
		}
		resp, body := srv.get(t, p)
		got := apitest.Decode[lookup](t, body)
		if resp.StatusCode != 200 || got.Status != "HEALTHY" || !reflect.DeepEqual(got.Memberships, want) {
			t.Errorf("%s: %d %s, want memberships %v", p, resp.StatusCode, body, want)
		}
	}
}

func TestLoadRoundTrip(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	env := map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": prefix}
	out, err := loadFile(t, env, "../../examples/memberships.json")
	if err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}
	if !strings.Contains(out, "loaded 6 contexts") {
		t.Errorf("load output: %s", out)
	}
	if out, err := loadFile(t, env, "../../examples/memberships.json"); err != nil || !strings.Contains(out, "0 refs added") {
		t.Errorf("second load (idempotent): %v\n%s", err, out)
	}
	srv := start(t, env)
	expectFixtureServed(t, srv, "../../examples/memberships.json")
}

func TestLoadRejectsMalformedFileBeforeWriting(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte("{\"contexts\": {\n\"alice\": {\"included\": [\"a.g1\"]},\n\"bob\": {\"included\": [\"\"]}\n}}"), 0o600)
	out, err := loadFile(t, map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": prefix}, bad)
	if err == nil || !strings.Contains(err.Error(), `bad.json:3: contexts["bob"].included[0]: empty segment ref`) {
		t.Fatalf("load of a malformed file: %v\n%s", err, out)
	}
	if keys, _ := c.Keys(context.Background(), prefix+":*").Result(); len(keys) != 0 {
		t.Errorf("a rejected file wrote %v", keys)
	}
}

func TestLoadUsage(t *testing.T) {
	t.Parallel()
	if _, err := loadFile(t, nil, "../../examples/memberships.json"); err == nil || !strings.Contains(err.Error(), "no store configured") {
		t.Errorf("load without Redis: %v", err)
	}
	if _, err := loadFile(t, map[string]string{"BIGSEG_REDIS_URL": "redis://127.0.0.1:1"}); err == nil {
		t.Error("load without a file succeeded")
	}
}

func TestClusterEndToEnd(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	for _, prefix := range []string{"launchdarkly", "{ld}"} {
		t.Run(prefix, func(t *testing.T) {
			env := map[string]string{"BIGSEG_REDIS_CLUSTER_URL": "redis://" + cluster.Addrs()[0], "BIGSEG_PREFIX": prefix}
			if out, err := loadFile(t, env, "--replace", "../../examples/memberships.json"); err != nil {
				t.Fatalf("load: %v\n%s", err, out)
			}
			srv := start(t, env)
			if rec := srv.logs.find("using Redis"); len(rec) != 1 || rec[0]["topology"] != "cluster" {
				t.Errorf("start-up log: %v", rec)
			}
			expectFixtureServed(t, srv, "../../examples/memberships.json")
			body, _ := json.Marshal(map[string][]string{"contextKeys": {"alice", "bob", "carol@example.com", "zoë", "nobody"}})
			resp, b := srv.post(t, "/memberships", string(body))
			if results := apitest.Decode[struct{ Results []lookup }](t, b).Results; resp.StatusCode != 200 || len(results) != 5 || results[0].Memberships["beta-users.g3"] != true {
				t.Errorf("batch across slots: %d %s", resp.StatusCode, b)
			}
		})
	}
}

func TestSentinelEndToEnd(t *testing.T) {
	t.Parallel()
	set := redistest.StartSentinel(t, "bigseg-master")
	env := map[string]string{"BIGSEG_REDIS_SENTINEL_URL": set.URL(),
		"BIGSEG_CACHE_SIZE": "0", "BIGSEG_STATUS_POLL_INTERVAL": "50ms"}
	if out, err := loadFile(t, env, "../../examples/memberships.json"); err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}
	if n, err := set.Master.Client().Do(context.Background(), "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d, %v", n, err)
	}
	srv := start(t, env)
	expectFixtureServed(t, srv, "../../examples/memberships.json")
	set.Failover(t)
	waitFor(t, "lookups served by the new master", func() bool {
		resp, err := http.Get(srv.URL + "/memberships/alice")
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	expectFixtureServed(t, srv, "../../examples/memberships.json")
	if resp, body := srv.get(t, "/readyz"); resp.StatusCode != 200 {
		waitFor(t, "ready after failover", func() bool { r, _ := http.Get(srv.URL + "/readyz"); return r != nil && r.StatusCode == 200 })
		_ = body
	}
}

func TestTLSWithACLUser(t *testing.T) {
	t.Parallel()
	files := redistest.NewTLS(t)
	const password = "s3cret-Passw0rd"
	rs := redistest.StartTLS(t, files, "--user", "default", "off", "--user", "bigseg", "on", ">"+password, "~*", "&*", "+@all")
	pwFile := filepath.Join(t.TempDir(), "password")
	os.WriteFile(pwFile, []byte(password+"\n"), 0o600) // as a mounted secret often is, newline and all
	env := map[string]string{
		"BIGSEG_REDIS_URL": "rediss://bigseg@" + rs.Addr(), "BIGSEG_REDIS_PASSWORD_FILE": pwFile,
		"BIGSEG_REDIS_TLS_CA_FILE": files.CAFile, "BIGSEG_REDIS_TLS_CERT_FILE": files.ClientCert, "BIGSEG_REDIS_TLS_KEY_FILE": files.ClientKey,
	}
	if out, err := loadFile(t, env, "../../examples/memberships.json"); err != nil {
		t.Fatalf("load over TLS: %v\n%s", err, out)
	}
	srv := start(t, env)
	expectFixtureServed(t, srv, "../../examples/memberships.json")
	if resp, body := srv.get(t, "/status"); resp.StatusCode != 200 || strings.Contains(string(body), password) {
		t.Errorf("/status: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(srv.logs.all(), password) {
		t.Error("the password is in the logs")
	}

	t.Run("wrong password", func(t *testing.T) {
		os.WriteFile(pwFile, []byte("wrong"), 0o600)
		srv := start(t, env)
		resp, body := srv.get(t, "/memberships/alice")
		if resp.StatusCode != 503 || strings.Contains(string(body), "wrong") {
			t.Errorf("wrong password: %d %s", resp.StatusCode, body)
		}
		os.WriteFile(pwFile, []byte(password), 0o600)
	})
	t.Run("untrusted server", func(t *testing.T) {
		other := redistest.NewTLS(t) // a CA that did not sign the server's certificate
		e := map[string]string{}
		for k, v := range env {
			e[k] = v
		}
		e["BIGSEG_REDIS_TLS_CA_FILE"] = other.CAFile
		srv := start(t, e)
		if resp, body := srv.get(t, "/memberships/alice"); resp.StatusCode != 503 {
			t.Errorf("server certificate from an unknown CA: %d %s", resp.StatusCode, body)
		}
	})
}

func TestRedisConfigConflicts(t *testing.T) {
	t.Parallel()
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("filepass"), 0o600)
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BIGSEG_REDIS_URL": "redis://a:1", "BIGSEG_REDIS_CLUSTER_URL": "redis://b:1"}, "BIGSEG_REDIS_URL and BIGSEG_REDIS_CLUSTER_URL are set: choose one Redis topology"},
		{map[string]string{"BIGSEG_REDIS_CLUSTER_URL": "redis://b:1", "BIGSEG_REDIS_SENTINEL_URL": "redis://c:1?master_name=m"}, "choose one Redis topology"},
		{map[string]string{"BIGSEG_REDIS_SENTINEL_URL": "redis://c:1"}, "BIGSEG_REDIS_SENTINEL_URL: a Sentinel URL names its master: add master_name=<name>"},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://u:hunter2@a:1", "BIGSEG_REDIS_PASSWORD_FILE": pw}, "BIGSEG_REDIS_URL has a password and BIGSEG_REDIS_PASSWORD_FILE is set: choose one"},
		{map[string]string{"BIGSEG_REDIS_SENTINEL_URL": "redis://:hunter2@c:1?master_name=m", "BIGSEG_REDIS_SENTINEL_PASSWORD_FILE": pw}, "BIGSEG_REDIS_SENTINEL_URL has the sentinels' password and BIGSEG_REDIS_SENTINEL_PASSWORD_FILE is set"},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://a:1", "BIGSEG_REDIS_SENTINEL_PASSWORD_FILE": pw}, "BIGSEG_REDIS_SENTINEL_PASSWORD_FILE is set without BIGSEG_REDIS_SENTINEL_URL"},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://a:1", "BIGSEG_REDIS_TLS_CA_FILE": "/ca.pem"}, "BIGSEG_REDIS_TLS_CA_FILE is set but TLS is off: use a rediss:// URL"},
		{map[string]string{"BIGSEG_REDIS_CLUSTER_URL": "redis://a:1", "BIGSEG_REDIS_TLS_SERVER_NAME": "r"}, "BIGSEG_REDIS_TLS_SERVER_NAME is set but TLS is off"},
		{map[string]string{"BIGSEG_REDIS_URL": "rediss://a:1", "BIGSEG_REDIS_TLS_CERT_FILE": "/c.pem"}, "go together"},
		{map[string]string{"BIGSEG_REDIS_PASSWORD_FILE": pw}, "BIGSEG_REDIS_PASSWORD_FILE is set but no Redis is"},
		{map[string]string{"BIGSEG_REDIS_CLUSTER_URL": "redis://a:1?addr=nohostport"}, "BIGSEG_REDIS_CLUSTER_URL: redis: unable to parse addr param: nohostport"},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://a:1", "BIGSEG_SEED_FILE": "x.json"}, "BIGSEG_SEED_FILE is for the embedded store"},
		{map[string]string{"BIGSEG_REDIS_URL": "mysql://u:hunter2@a:1"}, "BIGSEG_REDIS_URL"},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://u:hunter2@a:1?read_timeout=soon"}, "BIGSEG_REDIS_URL: redis: invalid read_timeout duration"},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://a:1?dial_timeout=0"}, "BIGSEG_REDIS_URL: dial_timeout: must be positive"},
		{map[string]string{"BIGSEG_REDIS_SENTINEL_URL": "redis://c:1?master_name=m&read_timeout=-1s"}, "BIGSEG_REDIS_SENTINEL_URL: read_timeout: must be positive"},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://a:1?pool=3"}, "BIGSEG_REDIS_URL: redis: unexpected option: pool"},
		{map[string]string{"BIGSEG_REDIS_URL": "rediss://a:1", "BIGSEG_REDIS_TLS_CA_FILE": "/does/not/exist.pem"}, "BIGSEG_REDIS_TLS_CA_FILE"},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://a:1", "BIGSEG_REDIS_PASSWORD_FILE": "/does/not/exist"}, "BIGSEG_REDIS_PASSWORD_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := runRefused(ctx, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run = %v, want an error containing %q", err, tt.want)
			}
			for _, secret := range []string{"hunter2", "filepass"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("secret in error: %v", err)
				}
			}
		})
	}
}

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	srv := start(t, nil)
	var out bytes.Buffer
	if err := runProgram(context.Background(), nil, &out, io.Discard, "healthcheck", "--url", srv.URL+"/livez"); err != nil || out.String() != "ok\n" {
		t.Errorf("healthcheck of a live server: %v %q", err, out.String())
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	// as in the Docker image: the port of BIGSEG_ADDR on 127.0.0.1
	if err := runProgram(context.Background(), map[string]string{"BIGSEG_ADDR": ":" + port}, io.Discard, io.Discard, "healthcheck"); err != nil {
		t.Errorf("healthcheck by BIGSEG_ADDR: %v", err)
	}
	srv.stop()
	if err := runProgram(context.Background(), nil, io.Discard, io.Discard, "healthcheck", "--url", srv.URL+"/livez", "--timeout", "1s"); err == nil {
		t.Error("healthcheck of a stopped server succeeded")
	}
	if err := runProgram(context.Background(), map[string]string{"BIGSEG_ADDR": "127.0.0.1:0"}, io.Discard, io.Discard, "healthcheck"); err == nil || !strings.Contains(err.Error(), "no fixed port") {
		t.Errorf("healthcheck with port 0: %v", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// withParams adds go-redis's parameters to a Redis URL.
func withParams(url string, params ...string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + strings.Join(params, "&")
}

// clientOf is the Redis client the program makes with env.
func clientOf(t *testing.T, env map[string]string) goredis.UniversalClient {
	t.Helper()
	cfg, err := configOf(env)
	if err != nil {
		t.Fatal(err)
	}
	o, err := cfg.redisOptions()
	if err != nil {
		t.Fatal(err)
	}
	c, err := redis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRedisURLParameters: the Redis URL's parameters are go-redis's, in every topology, and
// where a URL names no timeout or retries bigseg's own defaults apply (go-redis's would make a
// dead Redis look like a hang). max_retries=-1 is none, as go-redis spells it.
func TestRedisURLParameters(t *testing.T) {
	t.Parallel()
	type got struct {
		dial, read, write time.Duration
		retries, pool, db int
	}
	defaults := got{redis.DefaultDialTimeout, redis.DefaultReadTimeout, redis.DefaultWriteTimeout, redis.DefaultMaxRetries, 0, 0}
	tuned := got{2 * time.Second, 3 * time.Second, 4 * time.Second, 0, 7, 0}
	const params = "?dial_timeout=2s&read_timeout=3s&write_timeout=4s&max_retries=-1&pool_size=7"
	for _, tc := range []struct {
		env  map[string]string
		want got
	}{
		{map[string]string{"BIGSEG_REDIS_URL": "redis://127.0.0.1:1"}, defaults},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://127.0.0.1:1/3" + params}, got{2 * time.Second, 3 * time.Second, 4 * time.Second, 0, 7, 3}},
		{map[string]string{"BIGSEG_REDIS_URL": "redis://127.0.0.1:1?max_retries=2"}, got{redis.DefaultDialTimeout, redis.DefaultReadTimeout, redis.DefaultWriteTimeout, 2, 0, 0}},
		{map[string]string{"BIGSEG_REDIS_CLUSTER_URL": "redis://127.0.0.1:1?addr=127.0.0.1:2"}, defaults},
		{map[string]string{"BIGSEG_REDIS_CLUSTER_URL": "redis://127.0.0.1:1" + params}, tuned},
		{map[string]string{"BIGSEG_REDIS_SENTINEL_URL": "redis://127.0.0.1:1?master_name=m"}, defaults},
		{map[string]string{"BIGSEG_REDIS_SENTINEL_URL": "redis://127.0.0.1:1" + params + "&master_name=m&db=2"}, got{2 * time.Second, 3 * time.Second, 4 * time.Second, 0, 7, 2}},
	} {
		c := clientOf(t, tc.env)
		var g got
		switch c := c.(type) {
		case *goredis.Client: // standalone and Sentinel (a failover client)
			o := c.Options()
			g = got{o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries, o.PoolSize, o.DB}
			if !strings.Contains(fmt.Sprint(tc.env), "pool_size") {
				g.pool = 0 // go-redis's default, 10 per CPU, filled in
			}
		case *goredis.ClusterClient:
			o := c.Options()
			g = got{o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries, o.PoolSize, 0}
			if !strings.Contains(fmt.Sprint(tc.env), "pool_size") {
				g.pool = 0
			}
		default:
			t.Fatalf("%v: a %T", tc.env, c)
		}
		g.retries = max(g.retries, 0) // none: the cluster client keeps go-redis's -1, the others 0
		if g != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.env, g, tc.want)
		}
		c.Close()
	}
}

// The settings that went are refused, each with what replaces it, its value in the message
// where it is no secret.
func TestRemovedSettingsSayWhatReplacesThem(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"BIGSEG_REDIS_READ_TIMEOUT=2s":       "BIGSEG_REDIS_READ_TIMEOUT is gone: put read_timeout=2s in the Redis URL",
		"BIGSEG_REDIS_MAX_RETRIES=0":         "BIGSEG_REDIS_MAX_RETRIES is gone: put max_retries=0 in the Redis URL (-1 for none)",
		"BIGSEG_REDIS_DB=2":                  "redis://host:6379/2 (or db=2 as a parameter)",
		"BIGSEG_REDIS_CLUSTER_ADDRS=a:1,b:1": "BIGSEG_REDIS_CLUSTER_URL=redis://host1:port?addr=host2:port&addr=host3:port (the addresses were a:1,b:1)",
		"BIGSEG_REDIS_PASSWORD=hunter2":      "BIGSEG_REDIS_PASSWORD is gone: put it in the file BIGSEG_REDIS_PASSWORD_FILE names",
		"BIGSEG_PPROF_ADDR=127.0.0.1:6060":   "BIGSEG_PPROF_ADDR is gone: Go's /debug/pprof is served on the BIGSEG_METRICS_ADDR listener, the operators' one: set that (to 127.0.0.1:6060) instead",
		"BIGSEG_MAX_INFLIGHT=1024":           "BIGSEG_MAX_INFLIGHT is gone: lookups are bounded by the connections, one at a time on each (BIGSEG_MAX_CONNS on each listener)",
	} {
		err := unknownVariables([]string{env})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want %q", env, err, want)
		}
	}
	for name := range removed {
		if slices.Contains(settings.Names(varPrefix, &config{}), varPrefix+"_"+name) {
			t.Errorf("%s is both a setting and removed", name)
		}
	}
}

// "synchronizedOn": 0 means never synchronized, in "server load" as in the embedded store:
// instances reading that Redis report the data stale, and stay available and ready.
func TestLoadNeverSynchronized(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	path := filepath.Join(t.TempDir(), "never.json")
	writeFile(t, path, `{"synchronizedOn": 0, "contexts": {"alice": {"included": ["a.g1"]}}}`)
	env := map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": prefix}
	// Flags may also follow the file name.
	if out, err := loadFile(t, env, path, "--replace"); err != nil || !strings.Contains(out, "synchronized_on 0") {
		t.Fatalf("load: %v\n%s", err, out)
	}
	if v, _ := c.Get(context.Background(), prefix+":big_segments_synchronized_on").Result(); v != "0" {
		t.Errorf("synchronized_on = %q, want 0", v)
	}
	srv := start(t, env)
	var body []byte
	waitFor(t, "the first poll", func() bool {
		_, body = srv.get(t, "/status")
		return apitest.Decode[map[string]any](t, body)["checkedAt"] != nil
	})
	if st := apitest.Decode[map[string]any](t, body); st["available"] != true || st["stale"] != true || st["lastSynchronizedOn"] != 0.0 {
		t.Errorf("/status after loading a never-synchronized fixture: %s", body)
	}
	if resp, body := srv.get(t, "/readyz"); resp.StatusCode != 200 {
		t.Errorf("/readyz: %d %s", resp.StatusCode, body)
	}
	if resp, body := srv.get(t, "/memberships/alice"); resp.StatusCode != 200 || apitest.Decode[lookup](t, body).Status != "STALE" {
		t.Errorf("lookup: %d %s, want 200 STALE", resp.StatusCode, body)
	}
}

// The healthcheck asks the host BIGSEG_ADDR names, not always 127.0.0.1.
func TestHealthcheckDialsTheListenAddress(t *testing.T) {
	t.Parallel()
	port := strconv.Itoa(redistest.FreePort(t))
	srv := start(t, map[string]string{"BIGSEG_ADDR": "127.0.0.2:" + port})
	if !strings.HasPrefix(srv.URL, "http://127.0.0.2:") {
		t.Fatalf("listening on %s", srv.URL)
	}
	if err := runProgram(context.Background(), map[string]string{"BIGSEG_ADDR": "127.0.0.2:" + port}, io.Discard, io.Discard, "healthcheck"); err != nil {
		t.Errorf("healthcheck of 127.0.0.2:%s: %v", port, err)
	}
}

// A rediss:// URL with an IPv6 host verifies the certificate against that host, not "[".
func TestRedisTLSServerNameIPv6(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{"rediss://[::1]:6380": "::1", "rediss://redis.internal:6380": "redis.internal",
		"rediss://10.0.0.1:6380/2": "10.0.0.1"} {
		c := clientOf(t, map[string]string{"BIGSEG_REDIS_URL": url})
		if tc := c.(*goredis.Client).Options().TLSConfig; tc == nil || tc.ServerName != want {
			t.Errorf("%s: TLS server name %v, want %q", url, tc, want)
		}
		c.Close()
	}
}

// Every removed setting is in docs/configuration.md's list of them.
func TestRemovedSettingsDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "## Removed settings")
	section, _, _ = strings.Cut(section, configMarker)
	for name := range removed {
		if !strings.Contains(section, "`"+varPrefix+"_"+name+"`") {
			t.Errorf("docs/configuration.md does not list %s_%s among the removed settings", varPrefix, name)
		}
	}
}
