package charttest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ptr[T any](v T) *T { return &v }

// breakages are renderings broken on purpose, one way each, and the check that must notice.
var breakages = []struct {
	name, check string
	base        []string // values files under testdata/values
	breakIt     func(r *release)
}{
	{"root filesystem writable", "security", nil, func(r *release) { r.container().SecurityContext.ReadOnlyRootFilesystem = ptr(false) }},
	{"capabilities kept", "security", nil, func(r *release) { r.container().SecurityContext.Capabilities = nil }},
	{"privilege escalation", "security", nil, func(r *release) { r.container().SecurityContext.AllowPrivilegeEscalation = ptr(true) }},
	{"may run as root", "security", nil, func(r *release) {
		r.container().SecurityContext.RunAsNonRoot = nil
		r.pod().SecurityContext.RunAsNonRoot = nil
	}},
	{"service links", "security", nil, func(r *release) { r.pod().EnableServiceLinks = nil }},
	{"service account token", "security", nil, func(r *release) { r.pod().AutomountServiceAccountToken = ptr(true) }},
	{"a label missing", "labels", nil, func(r *release) { delete(r.service.Labels, "app.kubernetes.io/version") }},
	{"no config checksum", "labels", nil, func(r *release) { delete(r.deployment.Spec.Template.Annotations, "checksum/config") }},
	{"Service selects other pods", "selectors", nil, func(r *release) { r.service.Spec.Selector = map[string]string{"app": "other"} }},
	{"PDB selects other pods", "selectors", nil, func(r *release) { r.pdb.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] = "other" }},
	{"ServiceMonitor selects another Service", "selectors", nil, func(r *release) { r.serviceMonitor.Spec.Selector.MatchLabels = map[string]string{"x": "y"} }},
	{"a misspelt setting", "settings", nil, func(r *release) { r.settings.Data["BIGSEG_API_TOKEN_FILE"] = "/x" }},
	{"a foreign variable", "settings", nil, func(r *release) {
		r.container().Env = append(r.container().Env, corev1.EnvVar{Name: "TZ", Value: "UTC"})
	}},
	{"tokens in the ConfigMap", "secrets", nil, func(r *release) { r.settings.Data["BIGSEG_API_TOKENS"] = "hunter2" }},
	{"tokens from a secretKeyRef", "secrets", nil, func(r *release) {
		r.container().Env = append(r.container().Env, corev1.EnvVar{Name: "BIGSEG_API_TOKENS", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "redis"}, Key: "password"}}})
	}},
	{"the collector's headers in clear", "secrets", []string{"otel"}, func(r *release) {
		for i, e := range r.container().Env {
			if e.Name == otelHeaders {
				r.container().Env[i] = corev1.EnvVar{Name: otelHeaders, Value: "authorization=Bearer%20hunter2"}
			}
		}
	}},
	{"the collector's headers in the ConfigMap", "secrets", []string{"otel"}, func(r *release) {
		r.settings.Data[otelHeaders] = "authorization=Bearer%20hunter2"
	}},
	{"a password in the URL", "secrets", nil, func(r *release) { r.settings.Data["BIGSEG_REDIS_URL"] = "rediss://bigseg:hunter2@redis:6380" }},
	{"a password parameter in the Sentinel URL", "secrets", nil, func(r *release) {
		r.settings.Data["BIGSEG_REDIS_SENTINEL_URL"] = "redis://s:26379?master_name=m&password=hunter2"
	}},
	{"a file outside the mounts", "secrets", nil, func(r *release) { r.settings.Data["BIGSEG_REDIS_TLS_CA_FILE"] = "/etc/bigseg/nowhere/ca.crt" }},
	{"subPath mount", "secrets", nil, func(r *release) { r.container().VolumeMounts[0].SubPath = "tls.crt" }},
	{"world-readable secret", "secrets", nil, func(r *release) { r.pod().Volumes[0].Secret.DefaultMode = ptr(int32(0o644)) }},
	{"API port moved", "probes", nil, func(r *release) { r.container().Ports[0].ContainerPort = 8081 }},
	{"HTTP probe on HTTPS", "probes", nil, func(r *release) { r.container().ReadinessProbe.HTTPGet.Scheme = corev1.URISchemeHTTP }},
	{"probes on the API port under mutual TLS", "probes", nil, func(r *release) { r.settings.Data["BIGSEG_TLS_CLIENT_CA_FILE"] = "/etc/bigseg/tls/tls.crt" }},
	{"readiness slower than the drain", "probes", nil, func(r *release) { r.container().ReadinessProbe.PeriodSeconds = 10 }},
	{"grace equal to the drain", "grace", nil, func(r *release) { r.pod().TerminationGracePeriodSeconds = ptr(int64(15)) }},
	{"grace below a longer drain", "grace", nil, func(r *release) { r.settings.Data["BIGSEG_WRITE_TIMEOUT"] = "1m" }},
	{"no GOMEMLIMIT", "goRuntime", nil, func(r *release) { r.container().Env = r.container().Env[1:] }},
	{"GOMEMLIMIT at the limit", "goRuntime", nil, func(r *release) { r.container().Env[0].Value = "1024MiB" }},
	{"GOMAXPROCS from memory", "goRuntime", nil, func(r *release) { r.container().Env[1].ValueFrom.ResourceFieldRef.Resource = "limits.memory" }},
	{"request above limit", "goRuntime", nil, func(r *release) { r.container().Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3") }},
	{"Service targets a number", "service", nil, func(r *release) { r.service.Spec.Ports[0].TargetPort = intstr.FromInt32(8080) }},
	{"Service says http under TLS", "service", nil, func(r *release) { r.service.Spec.Ports[0].AppProtocol = ptr("http") }},
	{"RESP port moved", "resp", nil, func(r *release) { r.container().Ports[2].ContainerPort = 6381 }},
	{"RESP port left out of the Service", "resp", nil, func(r *release) { r.service.Spec.Ports = r.service.Spec.Ports[:2] }},
	{"RESP port without its listener", "resp", nil, func(r *release) { delete(r.settings.Data, "BIGSEG_RESP_ADDR") }},
	{"PDB blocks drains", "pdb", nil, func(r *release) { r.pdb.Spec.MaxUnavailable = ptr(intstr.FromInt32(0)) }},
	{"metrics port closed", "networkPolicy", nil, func(r *release) { r.networkPolicy.Spec.Ingress = r.networkPolicy.Spec.Ingress[:1] }},
	{"RESP port closed", "networkPolicy", nil, func(r *release) { r.networkPolicy.Spec.Ingress = r.networkPolicy.Spec.Ingress[:2] }},
	{"egress without the collector's port", "networkPolicy", []string{"otel"}, func(r *release) {
		r.networkPolicy.Spec.Egress = r.networkPolicy.Spec.Egress[:len(r.networkPolicy.Spec.Egress)-1]
	}},
	{"egress without DNS", "networkPolicy", nil, func(r *release) { r.networkPolicy.Spec.Egress = r.networkPolicy.Spec.Egress[1:] }},
	{"scrapes the API port", "serviceMonitor", nil, func(r *release) { r.serviceMonitor.Spec.Endpoints[0].Port = "http" }},
	{"another job label", "serviceMonitor", nil, func(r *release) {
		r.serviceMonitor.Spec.Endpoints[0].RelabelConfigs[0].Replacement = ptr("demo-bigseg")
	}},
	{"plain scrape of TLS metrics", "serviceMonitor", nil, func(r *release) { r.serviceMonitor.Spec.Endpoints[0].Scheme = nil }},
	{"a rule dropped", "prometheusRule", nil, func(r *release) {
		g := &r.rule.Spec.Groups[0]
		g.Rules = g.Rules[:len(g.Rules)-1]
	}},
	{"a rule changed", "prometheusRule", nil, func(r *release) { r.rule.Spec.Groups[0].Rules[0].Expr = intstr.FromString("vector(1)") }},
	{"dashboard edited", "dashboard", nil, func(r *release) {
		r.dashboard.Data["bigseg.json"] = strings.Replace(r.dashboard.Data["bigseg.json"], "bigseg", "bigseq", 1)
	}},
	{"dashboard unlabelled", "dashboard", nil, func(r *release) { delete(r.dashboard.Labels, "grafana_dashboard") }},
	{"replicas fight the HPA", "hpa", []string{"hpa"}, func(r *release) { r.deployment.Spec.Replicas = ptr(int32(3)) }},
	{"CPU target without a CPU request", "hpa", []string{"hpa"}, func(r *release) { delete(r.container().Resources.Requests, corev1.ResourceCPU) }},
	{"HPA scales something else", "selectors", []string{"hpa"}, func(r *release) { r.hpa.Spec.ScaleTargetRef.Name = "other" }},
}

// breakageBase is the rendering most breakages start from: TLS (the Redis-protocol listener's
// too), Redis secrets and every optional object.
var breakageBase = []string{"monitoring", "tls"}

// TestChecksCatchBreakage shows that every check can fail: each breakage passes its check
// before it is applied and fails it after.
func TestChecksCatchBreakage(t *testing.T) {
	f := getFacts(t)
	files := valuesFiles(t)
	rendered := map[string]string{}
	covered := map[string]bool{}
	for _, b := range breakages {
		base := b.base
		if base == nil {
			base = breakageBase
		}
		key := strings.Join(base, "+")
		if _, ok := rendered[key]; !ok {
			var paths []string
			for _, n := range base {
				paths = append(paths, files[n])
			}
			out, err := template(t, paths)
			if err != nil {
				t.Fatal(err)
			}
			rendered[key] = out
		}
		covered[b.check] = true
		t.Run(b.name, func(t *testing.T) {
			r, err := decode(rendered[key])
			if err != nil {
				t.Fatal(err)
			}
			c := checks[b.check]
			if c == nil {
				t.Fatalf("no check %q", b.check)
			}
			if p := c(r, f); len(p) > 0 {
				t.Fatalf("%s fails before the breakage: %v", b.check, p)
			}
			b.breakIt(r)
			p := c(r, f)
			if len(p) == 0 {
				t.Errorf("%s does not notice: %s", b.check, b.name)
			}
			t.Logf("%s: %v", b.check, p)
		})
	}
	for name := range checks {
		if !covered[name] {
			t.Errorf("no breakage shows that check %s can fail", name)
		}
	}
}

// TestDecodeIsStrict: a field the API types do not have, or a field given twice, is an
// error, not silently dropped.
func TestDecodeIsStrict(t *testing.T) {
	out, err := template(t, []string{valuesFiles(t)["defaults"]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(out); err != nil {
		t.Fatalf("the unbroken rendering does not decode: %v", err)
	}
	for name, broken := range map[string]string{
		"unknown field":   strings.Replace(out, "      enableServiceLinks: false", "      enableServiceLinks: false\n      enableServiceLink: false", 1),
		"duplicate field": strings.Replace(out, "      enableServiceLinks: false", "      enableServiceLinks: false\n      enableServiceLinks: true", 1),
		"unknown kind":    out + "\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: x}\n",
	} {
		if broken == out {
			t.Fatalf("%s: the breakage did not apply", name)
		}
		if _, err := decode(broken); err == nil {
			t.Errorf("%s: decoded without error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestPodRunCatchesBreakage: runPod notices probes the real server does not answer as they
// expect, a Redis-protocol listener out of reach, and settings the server refuses.
func TestPodRunCatchesBreakage(t *testing.T) {
	f := getFacts(t)
	for _, tc := range []struct {
		name, base string // base: a values file under testdata/values
		breakIt    func(r *release)
	}{
		{"readiness path", "defaults", func(r *release) { r.container().ReadinessProbe.HTTPGet.Path = "/ready" }},
		{"liveness on /status", "defaults", func(r *release) { r.container().LivenessProbe.HTTPGet.Path = "/status" }},
		{"probe port unknown", "defaults", func(r *release) { r.container().LivenessProbe.HTTPGet.Port = intstr.FromString("admin") }},
		{"GOMEMLIMIT malformed", "defaults", func(r *release) { r.container().Env[0].Value = "230M" }},
		{"RESP container port elsewhere", "environments", func(r *release) { r.container().Ports[2].ContainerPort = 6380 }},
		{"a removed setting", "environments", func(r *release) { r.settings.Data["BIGSEG_RESP_TLS"] = "true" }},
		{"an environment name the server refuses", "environments", func(r *release) { r.settings.Data["BIGSEG_ENVIRONMENTS"] = "Production=ld-prod" }},
		{"BIGSEG_PREFIX beside BIGSEG_ENVIRONMENTS", "environments", func(r *release) { r.settings.Data["BIGSEG_PREFIX"] = "launchdarkly" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, valuesFiles(t)[tc.base])
			if p := runPod(t, r, f); len(p) > 0 {
				t.Fatalf("runPod fails before the breakage: %v", p)
			}
			tc.breakIt(r)
			p := runPod(t, r, f)
			if len(p) == 0 {
				t.Errorf("runPod does not notice: %s", tc.name)
			}
			t.Logf("%v", p)
		})
	}
}
