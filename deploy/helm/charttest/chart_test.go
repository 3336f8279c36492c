package charttest

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// TestLint runs helm lint --strict with each values file. Lint renders templates in a mode
// where fail only logs, so its output is checked for that too.
func TestLint(t *testing.T) {
	for _, name := range sortedKeys(valuesFiles(t)) {
		path := valuesFiles(t)[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := runHelm(t, "lint", "--strict", chartDir, "-f", path)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{"[ERROR]", "[WARNING]", "Fail:"} {
				if strings.Contains(out, bad) {
					t.Errorf("helm lint says %s:\n%s", bad, out)
				}
			}
		})
	}
}

// TestRenderedCharts renders the chart with each values file, decodes every object strictly
// and runs every check on it.
func TestRenderedCharts(t *testing.T) {
	f := getFacts(t)
	for _, name := range sortedKeys(valuesFiles(t)) {
		path := valuesFiles(t)[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := render(t, path)
			t.Logf("rendered %s", strings.Join(r.kinds, ", "))
			for _, c := range sortedKeys(checks) {
				for _, problem := range checks[c](r, f) {
					t.Errorf("%s: %s", c, problem)
				}
			}
		})
	}
}

// TestValuesFilesCoverTheChart: the values files together render every kind of object the
// chart has, and each file renders what it exists for.
func TestValuesFilesCoverTheChart(t *testing.T) {
	files := valuesFiles(t)
	want := map[string][]string{
		"defaults":     {"Deployment", "Service", "ConfigMap", "ServiceAccount", "PodDisruptionBudget"},
		"hpa":          {"HorizontalPodAutoscaler"},
		"monitoring":   {"NetworkPolicy", "ServiceMonitor", "PrometheusRule", "ConfigMap/demo-bigseg-dashboard"},
		"environments": {"NetworkPolicy"},
		"tls":          {"ServiceMonitor"},
		"dynamodb":     {"NetworkPolicy"},
	}
	for _, name := range sortedKeys(want) {
		r := render(t, files[name])
		got := strings.Join(r.kinds, " ")
		for _, kind := range want[name] {
			if !strings.Contains(" "+got, " "+kind) {
				t.Errorf("%s renders %s, no %s", name, got, kind)
			}
		}
	}
	r := render(t, files["defaults"])
	if strings.Contains(strings.Join(r.kinds, " "), "HorizontalPodAutoscaler") || r.networkPolicy != nil || r.serviceMonitor != nil || r.rule != nil || r.dashboard != nil {
		t.Errorf("the defaults render optional objects: %v", r.kinds)
	}
}

// TestRenderedPodsRunTheServer starts the real server with each rendered pod's environment and
// files, probes it as kubelet would and scrapes it as Prometheus would.
func TestRenderedPodsRunTheServer(t *testing.T) {
	f := getFacts(t)
	for _, name := range sortedKeys(valuesFiles(t)) {
		path := valuesFiles(t)[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, problem := range runPod(t, render(t, path), f) {
				t.Error(problem)
			}
		})
	}
}

// TestEverySettingReachable: every setting `server -h` lists is documented in values.yaml and
// reachable from values: through config (rendered as given), or through a value of its own
// that one of the values files sets. The settings that would hold a secret in clear are
// refused instead, and their *_FILE twins are reachable.
func TestEverySettingReachable(t *testing.T) {
	f := getFacts(t)
	rendered := map[string]bool{}
	for _, path := range valuesFiles(t) {
		for name := range render(t, path).env() {
			rendered[name] = true
		}
	}
	for _, name := range sortedKeys(f.vars) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if !regexp.MustCompile(`\b` + name + `\b`).Match(f.values) {
				t.Errorf("values.yaml does not mention %s", name)
			}
			sample := f.vars[name].def
			if sample == "" {
				sample = "x"
			}
			out, err := template(t, withStore(t, fmt.Sprintf("config:\n  %s: %q\n", name, sample)))
			switch {
			case err == nil:
				r, err := decode(out)
				if err != nil {
					t.Fatal(err)
				}
				if got := r.settings.Data[name]; got != sample {
					t.Errorf("config.%s=%q renders as %q", name, sample, got)
				}
			case strings.Contains(err.Error(), "secrets never go in values"):
				if !strings.Contains(strings.Join(clearSecrets, " "), name) {
					t.Errorf("config.%s refused as a secret, but it is not one of %v", name, clearSecrets)
				}
				if !rendered[name+"_FILE"] {
					t.Errorf("%s is refused and no values file sets %s_FILE", name, name)
				}
			case strings.Contains(err.Error(), "not config"):
				if !rendered[name] {
					t.Errorf("config.%s is refused (%v), and no values file sets it otherwise", name, err)
				}
			default:
				t.Errorf("config.%s=%q: %v", name, sample, err)
			}
		})
	}
	for _, name := range clearSecrets {
		if _, ok := f.vars[name]; !ok {
			t.Errorf("%s is in clearSecrets but `server -h` does not list it", name)
		}
	}
}

// TestDocumentedDefaults: the defaults values.yaml's config list shows are the server's.
func TestDocumentedDefaults(t *testing.T) {
	f := getFacts(t)
	documented := regexp.MustCompile(`(?m)^#\s+(BIGSEG_[A-Z0-9_]+): "([^"]*)"`).FindAllStringSubmatch(string(f.values), -1)
	if len(documented) < 10 {
		t.Fatalf("values.yaml documents %d settings with their defaults", len(documented))
	}
	for _, m := range documented {
		v, ok := f.vars[m[1]]
		switch {
		case !ok:
			t.Errorf("values.yaml documents %s, which `server -h` does not list", m[1])
		case v.def != m[2]:
			t.Errorf("values.yaml gives %s the default %q; the server's is %q", m[1], m[2], v.def)
		}
	}
}

// TestChartRefuses: values that would not work, or would put a secret in clear, fail the
// render with a message naming the value at fault.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"no store", "{}", "no store: set redis.url, redis.cluster.url, redis.sentinel.url or dynamodb.table (or config.BIGSEG_SEED_FILE"},
		{"no store but a Redis password", "redis: {passwordSecret: {name: redis}}", "no store: set redis.url"},
		{"two topologies", "redis: {url: redis://r:6379, cluster: {url: 'redis://a:1'}}", "choose one of url"},
		{"the Cluster's addresses as before", "redis: {cluster: {addrs: [a:1]}}", "redis.cluster.addrs is gone: give redis.cluster.url, redis://host1:port?addr=host2:port"},
		{"the sentinels' addresses as before", "redis: {sentinel: {addrs: [a:26379], master: m}}", "redis.sentinel.addrs and redis.sentinel.master are gone: give redis.sentinel.url"},
		{"Redis TLS as before", "redis: {url: 'redis://r:6379', tls: {enabled: true}}", "redis.tls.enabled is gone: a rediss:// URL turns TLS on"},
		{"the sentinels' password in their URL", "redis: {sentinel: {url: 'redis://:hunter2@s:26379?master_name=m'}}", "redis.sentinel.url: holds a password"},
		{"the master's password in the Sentinel URL", "redis: {sentinel: {url: 'redis://s:26379?master_name=m&password=hunter2'}}", "redis.sentinel.url: holds a password"},
		{"password in the URL", "redis: {url: 'redis://user:hunter2@r:6379'}", "redis.url: holds a password"},
		{"password alone in the URL", "redis: {url: 'rediss://:hunter2@r:6379'}", "redis.url: holds a password"},
		{"clear tokens in config", "config: {BIGSEG_API_TOKENS: t1}", "secrets never go in values"},
		{"a structured setting in config", "config: {BIGSEG_ADDR: ':9999'}", "config.BIGSEG_ADDR: set it with ports.http"},
		{"the shutdown delay in config", "config: {BIGSEG_SHUTDOWN_DELAY: 1s}", "set it with shutdown.delay"},
		{"not a bigseg setting", "config: {GODEBUG: x}", "only BIGSEG_* settings"},
		{"a map as a setting", "redis: {url: 'redis://r:6379'}\nconfig: {BIGSEG_PREFIX: {a: b}}", "want a string, number or boolean"},
		{"TLS without a Secret", "tls: {enabled: true}", "tls.secretName: required"},
		{"client CA without TLS", "tls: {clientCA: {enabled: true}}", "requires tls.enabled"},
		{"metrics TLS under mutual TLS", "tls: {enabled: true, secretName: s, metrics: true, clientCA: {enabled: true}}", "not with tls.clientCA"},
		{"Redis CA without TLS", "redis: {url: 'redis://r:6379', tls: {caSecret: {name: ca}}}", "redis.url: redis.tls.caSecret and redis.tls.clientCertSecret need a rediss:// URL"},
		{"a duration without unit", "shutdown: {delay: 5}", "shutdown.delay: want a Go duration"},
		{"not a duration", "config: {BIGSEG_WRITE_TIMEOUT: ten seconds}", `config.BIGSEG_WRITE_TIMEOUT: "ten seconds" is not a Go duration`},
		{"the shutdown timeout as before", "shutdown: {timeout: 10s}", "shutdown.timeout is gone: after shutdown.delay, in-flight requests get config.BIGSEG_WRITE_TIMEOUT"},
		{"no margin", "shutdown: {marginSeconds: 0}", "shutdown.marginSeconds: at least 1"},
		{"not a memory quantity", "resources: {limits: {memory: lots}}", `resources.limits.memory: "lots" is not a memory quantity`},
		{"a percentage over 100", "goRuntime: {memoryLimitPercent: 120}", "goRuntime.memoryLimitPercent"},
		{"one port for both listeners", "ports: {http: 9090}", "ports.metrics: must differ"},
		{"HPA minimum over maximum", "autoscaling: {enabled: true, minReplicas: 5, maxReplicas: 2}", "autoscaling.minReplicas"},
		{"an environment name in capitals", "environments: {Production: ld-prod}", `environments: "Production" is not an environment name`},
		{"an environment name with a slash", "environments: {'prod/eu': ld-prod}", `"prod/eu" is not an environment name`},
		{"an environment name with a dot", "environments: {prod.eu: ld-prod}", `"prod.eu" is not an environment name`},
		{"an environment name starting with -", "environments: {'-prod': ld-prod}", `"-prod" is not an environment name`},
		{"an environment name of 64 characters", "environments: {" + strings.Repeat("a", 64) + ": ld}", "is not an environment name"},
		{"an empty prefix", "environments: {prod: ''}", `environments.prod: "" is not a key prefix`},
		{"a prefix with a comma", "environments: {prod: 'ld,prod'}", `environments.prod: "ld,prod" is not a key prefix`},
		{"a prefix with a space", "environments: {prod: 'ld prod'}", `environments.prod: "ld prod" is not a key prefix`},
		{"a number as prefix", "environments: {prod: 7}", "environments.prod: want its key prefix, a string"},
		{"one prefix twice", "redis: {url: 'redis://r:6379'}\nenvironments: {prod: ld, staging: ld}", `environments.staging: the prefix "ld" is environments.prod's too`},
		{"environments as a list", "environments: [prod]", "environments: want a map of name: key prefix"},
		{"BIGSEG_PREFIX with environments", "environments: {prod: ld-prod}\nconfig: {BIGSEG_PREFIX: ld}", "config.BIGSEG_PREFIX: not with environments"},
		{"several environments without Redis", "environments: {prod: ld-prod, staging: ld-staging}", "environments: several need Redis"},
		{"environments in config", "config: {BIGSEG_ENVIRONMENTS: 'prod=ld'}", "config.BIGSEG_ENVIRONMENTS: set it with environments"},
		{"the RESP address in config", "config: {BIGSEG_RESP_ADDR: ':6380'}", "config.BIGSEG_RESP_ADDR: set it with resp.enabled and ports.resp"},
		{"RESP TLS as before", "resp: {enabled: true}\ntls: {enabled: true, secretName: s, resp: true}", "tls.resp is gone: the Redis-protocol listener serves TLS whenever tls.enabled"},
		{"the RESP port on the API's", "resp: {enabled: true}\nports: {resp: 8080}", "ports.resp: must differ"},
		{"the RESP port on the metrics'", "resp: {enabled: true}\nports: {resp: 9090}", "ports.resp: must differ"},
		{"DynamoDB beside a Redis URL", "dynamodb: {table: ld}\nredis: {url: 'redis://r:6379'}", "dynamodb.table: not with redis.url: choose one store"},
		{"DynamoDB beside Redis Cluster", "dynamodb: {table: ld}\nredis: {cluster: {url: 'redis://a:1'}}", "dynamodb.table: not with redis.cluster.url"},
		{"DynamoDB beside Sentinel", "dynamodb: {table: ld}\nredis: {sentinel: {url: 'redis://a:26379?master_name=m'}}", "dynamodb.table: not with redis.sentinel.url"},
		{"the table in config", "config: {BIGSEG_DYNAMODB_TABLE: ld}", "config.BIGSEG_DYNAMODB_TABLE: set it with dynamodb.table"},
		{"consistency in config", "config: {BIGSEG_DYNAMODB_CONSISTENT_READ: false}", "set it with dynamodb.consistentRead"},
		{"eventual consistency without a table", "dynamodb: {consistentRead: false}", "dynamodb.consistentRead: only with dynamodb.table"},
		{"a region without a table", "dynamodb: {region: eu-west-1}", "only with dynamodb.table"},
		{"consistency not a boolean", "dynamodb: {table: ld, consistentRead: 'no'}", "dynamodb.consistentRead: want true or false"},
		{"an inventory interval under 1s", "inventory: {interval: 500ms}", `inventory.interval: "500ms": want 0s (no scans) or at least 1s`},
		{"an inventory interval without unit", "inventory: {interval: 60}", "inventory.interval: want a Go duration"},
		{"an inventory interval not a duration", "inventory: {interval: hourly}", `inventory.interval: "hourly" is not a Go duration`},
		{"a scanner with no scans", "redis: {url: 'redis://r:6379'}\ninventory: {interval: 0s, scanner: {enabled: true}}", "inventory.scanner.enabled: the scanner scans every inventory.interval, which is 0"},
		{"no reads a second", "inventory: {readsPerSecond: 0}", "inventory.readsPerSecond: want a whole number, at least 1, not 0"},
		{"a fraction of a read a second", "inventory: {readsPerSecond: 2.5}", "inventory.readsPerSecond: want a whole number"},
		{"reads a second not a number", "inventory: {readsPerSecond: lots}", "inventory.readsPerSecond: want a whole number"},
		{"too many exported segments", "inventory: {maxSegments: 10001}", "inventory.maxSegments: want a whole number from 0 to 10000, not 10001"},
		{"negative exported segments", "inventory: {maxSegments: -1}", "inventory.maxSegments: want a whole number from 0 to 10000"},
		{"the scanner's password in its URL", "redis: {url: 'redis://r:6379'}\ninventory: {scanner: {enabled: true, redisURL: 'redis://u:pw@r:6379'}}",
			"inventory.scanner.redisURL (in place of redis.url): holds a password; put it in a Secret and name it in inventory.scanner.passwordSecret"},
		{"the scanner's Redis URL with DynamoDB", "dynamodb: {table: ld}\ninventory: {scanner: {enabled: true, redisURL: 'redis://r:6379'}}",
			"dynamodb.table: not with inventory.scanner.redisURL"},
		{"DynamoDB behind egress without HTTPS", "dynamodb: {table: ld}\nnetworkPolicy: {enabled: true, egress: [{ports: [{port: 53, protocol: UDP}]}]}", "allow HTTPS (TCP 443)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, []string{writeValues(t, tc.values)})
			if err == nil {
				t.Fatalf("rendered with %s", tc.values)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\ndoes not say %q", err, tc.want)
			}
		})
	}
}

// TestGoMemLimit: GOMEMLIMIT is the configured share of limits.memory, in whole MiB, for
// every spelling of a quantity, as Kubernetes itself reads it (resource.Quantity).
func TestGoMemLimit(t *testing.T) {
	for _, tc := range []struct {
		memory string // as written in a values file
		pct    int
	}{
		{`"256Mi"`, 90}, {`1.5Gi`, 90}, {`1G`, 90}, {`500M`, 85}, {`1e9`, 90}, {`"2E9"`, 90},
		{`0.25Gi`, 100}, {`300000k`, 90}, {`128974848000m`, 90}, {`1Ti`, 75}, {`64Mi`, 50},
		{`268435456`, 90}, {`"536870912"`, 90}, {`3Gi`, 1},
	} {
		t.Run(fmt.Sprintf("%s at %d%%", tc.memory, tc.pct), func(t *testing.T) {
			t.Parallel()
			q := resource.MustParse(strings.Trim(tc.memory, `"`))
			r := render(t, withStore(t, fmt.Sprintf("resources: {limits: {memory: %s}}\ngoRuntime: {memoryLimitPercent: %d}\n", tc.memory, tc.pct))...)
			got := r.env()["GOMEMLIMIT"].value
			if want := fmt.Sprintf("%dMiB", quantityMiB(q.Value(), float64(tc.pct))); got != want {
				t.Errorf("limits.memory %s (%d bytes) at %d%%: GOMEMLIMIT=%q, want %q", tc.memory, q.Value(), tc.pct, got, want)
			}
		})
	}
	t.Run("no limit", func(t *testing.T) {
		r := render(t, withStore(t, "resources: {requests: {memory: 128Mi}, limits: null}\n")...)
		if v, ok := r.env()["GOMEMLIMIT"]; ok {
			t.Errorf("GOMEMLIMIT=%q without a memory limit", v.value)
		}
		if v, ok := r.env()["GOMAXPROCS"]; ok {
			t.Errorf("GOMAXPROCS set (%+v) without a CPU limit", v)
		}
	})
}

// TestGraceFollowsShutdown: the grace period is derived from the shutdown values, so
// changing them changes it.
func TestGraceFollowsShutdown(t *testing.T) {
	for _, tc := range []struct {
		values string
		want   int64
	}{
		{"{}", 5 + 15 + 5},
		{"shutdown: {delay: 30s}\nconfig: {BIGSEG_WRITE_TIMEOUT: 2m}", 30 + 120 + 5},
		{"shutdown: {delay: 1500ms, marginSeconds: 2}\nconfig: {BIGSEG_WRITE_TIMEOUT: 1m0.2s}", 62 + 2},
		{"shutdown: {delay: '0'}\nconfig: {BIGSEG_WRITE_TIMEOUT: 1h}", 3600 + 5},
	} {
		r := render(t, withStore(t, tc.values)...)
		if g := r.pod().TerminationGracePeriodSeconds; g == nil || *g != tc.want {
			t.Errorf("%s: terminationGracePeriodSeconds %d, want %d", tc.values, deref(g), tc.want)
		}
	}
}

// TestConfigChecksum: the pods' checksum/config annotation follows the settings, so that a
// changed setting rolls the pods, and only then.
func TestConfigChecksum(t *testing.T) {
	sum := func(values string) string {
		return render(t, withStore(t, values)...).deployment.Spec.Template.Annotations["checksum/config"]
	}
	base := sum("config: {BIGSEG_CACHE_TTL: 5s}")
	if again := sum("config: {BIGSEG_CACHE_TTL: 5s}"); again != base {
		t.Errorf("the same values give checksums %s and %s", base, again)
	}
	for _, changed := range []string{
		"config: {BIGSEG_CACHE_TTL: 6s}",
		"config: {BIGSEG_CACHE_TTL: 5s}\nshutdown: {delay: 6s}",
		"config: {BIGSEG_CACHE_TTL: 5s}\nredis: {url: 'redis://r:6379'}",
		"config: {BIGSEG_CACHE_TTL: 5s}\nenvironments: {production: ld-prod}",
		"config: {BIGSEG_CACHE_TTL: 5s}\nresp: {enabled: true}",
	} {
		if sum(changed) == base {
			t.Errorf("%q leaves checksum/config unchanged", changed)
		}
	}
}

// TestChartCarriesDeployFiles: the chart's files/alerts.yml and files/bigseg.json are
// deploy/prometheus/alerts.yml and deploy/grafana/bigseg.json byte for byte, both in the
// working tree (symbolic links) and in the package helm builds from it.
func TestChartCarriesDeployFiles(t *testing.T) {
	f := getFacts(t)
	want := map[string][]byte{"files/alerts.yml": f.alerts, "files/bigseg.json": f.dashboard}
	for name, content := range want {
		got, err := os.ReadFile(filepath.Join(chartDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(content) {
			t.Errorf("%s differs from the file in deploy/", name)
		}
	}
	dir := t.TempDir()
	if _, err := runHelm(t, "package", chartDir, "--destination", dir); err != nil {
		t.Fatal(err)
	}
	pkgs, _ := filepath.Glob(filepath.Join(dir, "bigseg-*.tgz"))
	if len(pkgs) != 1 {
		t.Fatalf("helm package made %v", pkgs)
	}
	fh, err := os.Open(pkgs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	gz, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	found := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "bigseg/")
		content, ok := want[name]
		if !ok {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			t.Errorf("the package holds %s as type %c, not a regular file", h.Name, h.Typeflag)
		}
		got, _ := io.ReadAll(tr)
		if string(got) != string(content) {
			t.Errorf("the package's %s differs from the file in deploy/", h.Name)
		}
		found[name] = true
	}
	for name := range want {
		if !found[name] {
			t.Errorf("the package has no %s", name)
		}
	}
}

// TestNotes renders NOTES.txt (helm template skips it, and helm install needs a cluster) from
// a copy of the chart where it is an ordinary template.
func TestNotes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bigseg")
	err := filepath.WalkDir(chartDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(chartDir, path)
		content, err := os.ReadFile(path) // follows the chart's symbolic links
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), content, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	// helm parses every template's output as YAML: the notes become one string in it.
	notesPath := filepath.Join(dir, "templates", "NOTES.txt")
	notes, err := os.ReadFile(notesPath)
	if err != nil {
		t.Fatal(err)
	}
	wrapped := `{{- define "charttest.notes" }}` + string(notes) + "{{- end }}\nnotes: {{ include \"charttest.notes\" . | toJson }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes.yaml"), []byte(wrapped), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(notesPath); err != nil {
		t.Fatal(err)
	}
	renderNotes := func(t *testing.T, valuesFiles ...string) string {
		t.Helper()
		args := []string{"template", releaseName, dir, "--namespace", namespace, "--show-only", "templates/notes.yaml"}
		for _, f := range valuesFiles {
			args = append(args, "-f", f)
		}
		out, err := runHelm(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Notes string }
		if err := yaml.Unmarshal([]byte(out), &doc); err != nil || doc.Notes == "" {
			t.Fatalf("no notes in %q (%v)", out, err)
		}
		return doc.Notes
	}
	files := valuesFiles(t)
	for _, tc := range []struct {
		values        string
		want, notWant []string
	}{
		{"defaults", []string{"http://demo-bigseg.bigseg.svc:8080/memberships/<contextKey>"}, []string{"WARNING", "Mutual TLS", "limits.memory is not set"}},
		{"tuned", []string{"WARNING: no Redis or DynamoDB is configured", "embedded store loaded from\n/examples/memberships.json"}, nil},
		{"cluster", nil, []string{"WARNING"}},
		{"dynamodb", []string{"Store: DynamoDB table launchdarkly-big-segments in eu-west-1"}, []string{"WARNING"}},
		{"tls", []string{"https://demo-bigseg.bigseg.svc:8080/status", "curl -sk https://", "rediss://demo-bigseg.bigseg.svc:6380."}, []string{"WARNING", "Mutual TLS", "--cert", "token"}},
		{"mtls", []string{"Mutual TLS", "CA in bigseg-clients-ca", "metrics port (9090)", "--cert client.crt"}, []string{"WARNING"}},
		{"tokens", []string{"need a token from Secret bigseg-api-tokens"}, []string{"WARNING", "Environments", "Redis-protocol"}},
		{"environments", []string{
			"http://demo-bigseg.bigseg.svc:8080/environments/production/memberships/<contextKey>",
			"Environments (name=prefix): production=ld-prod, qa_eu-2=ld:qa:eu-2, staging=ld-staging.",
			"Redis-protocol listener", "redis://demo-bigseg.bigseg.svc:6379.",
		}, []string{"WARNING", "rediss://", "AUTH"}},
	} {
		t.Run(tc.values, func(t *testing.T) {
			notes := renderNotes(t, files[tc.values])
			for _, s := range tc.want {
				if !strings.Contains(notes, s) {
					t.Errorf("the notes do not say %q:\n%s", s, notes)
				}
			}
			for _, s := range tc.notWant {
				if strings.Contains(notes, s) {
					t.Errorf("the notes say %q:\n%s", s, notes)
				}
			}
		})
	}
	if n := renderNotes(t, withStore(t, "resources: {limits: null}\n")...); !strings.Contains(n, "limits.memory is not set") {
		t.Errorf("no warning without a memory limit:\n%s", n)
	}
}
