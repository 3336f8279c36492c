package charttest

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A check compares one rendering of the chart with bigseg's facts and returns what is wrong.
// Each is run on every values file (TestRenderedCharts) and shown to fail on a rendering
// broken on purpose (TestChecksCatchBreakage).
type check func(r *release, f *facts) []string

var checks = map[string]check{
	"labels":         checkLabels,
	"selectors":      checkSelectors,
	"security":       checkSecurity,
	"settings":       checkSettingNames,
	"secrets":        checkSecrets,
	"probes":         checkProbes,
	"grace":          checkGrace,
	"goRuntime":      checkGoRuntime,
	"service":        checkService,
	"resp":           checkRESP,
	"pdb":            checkPDB,
	"hpa":            checkHPA,
	"networkPolicy":  checkNetworkPolicy,
	"serviceMonitor": checkServiceMonitor,
	"prometheusRule": checkPrometheusRule,
	"dashboard":      checkDashboard,
}

// standardLabels are the labels every object carries (Helm's and Kubernetes' recommended).
var standardLabels = []string{
	"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
	"app.kubernetes.io/managed-by", "helm.sh/chart",
}

func checkLabels(r *release, _ *facts) []string {
	var p []string
	for i, o := range r.objects {
		for _, l := range standardLabels {
			if o.GetLabels()[l] == "" {
				p = append(p, fmt.Sprintf("%s has no %s label", r.kinds[i], l))
			}
		}
	}
	for _, l := range standardLabels {
		if r.deployment.Spec.Template.Labels[l] == "" {
			p = append(p, fmt.Sprintf("the pod template has no %s label", l))
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(r.deployment.Spec.Template.Annotations["checksum/config"]) {
		p = append(p, fmt.Sprintf("the pod template's checksum/config annotation is %q, not a sha256", r.deployment.Spec.Template.Annotations["checksum/config"]))
	}
	return p
}

// selects reports whether sel selects an object labelled l; an empty selector selects
// nothing here, since the chart must never select every pod.
func selects(sel *metav1.LabelSelector, l map[string]string) (bool, error) {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return false, fmt.Errorf("empty selector")
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	if !s.Matches(labels.Set(l)) {
		return false, fmt.Errorf("selector %s, labels %v", s, l)
	}
	return true, nil
}

func checkSelectors(r *release, _ *facts) []string {
	var p []string
	podLabels := r.deployment.Spec.Template.Labels
	for what, sel := range map[string]*metav1.LabelSelector{
		"Deployment.spec.selector": r.deployment.Spec.Selector,
		"Service.spec.selector":    {MatchLabels: r.service.Spec.Selector},
	} {
		if ok, err := selects(sel, podLabels); !ok {
			p = append(p, fmt.Sprintf("%s does not select the pods (%v)", what, err))
		}
	}
	if r.pdb != nil {
		if ok, err := selects(r.pdb.Spec.Selector, podLabels); !ok {
			p = append(p, fmt.Sprintf("PodDisruptionBudget.spec.selector does not select the pods (%v)", err))
		}
	}
	if r.networkPolicy != nil {
		if ok, err := selects(&r.networkPolicy.Spec.PodSelector, podLabels); !ok {
			p = append(p, fmt.Sprintf("NetworkPolicy.spec.podSelector does not select the pods (%v)", err))
		}
	}
	if r.serviceMonitor != nil {
		if ok, err := selects(&r.serviceMonitor.Spec.Selector, r.service.Labels); !ok {
			p = append(p, fmt.Sprintf("ServiceMonitor.spec.selector does not select the Service (%v)", err))
		}
	}
	if r.hpa != nil {
		ref := r.hpa.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != r.deployment.Name {
			p = append(p, fmt.Sprintf("the HorizontalPodAutoscaler scales %s %s %s, not the Deployment", ref.APIVersion, ref.Kind, ref.Name))
		}
	}
	return p
}

func checkSecurity(r *release, _ *facts) []string {
	var p []string
	pod, c := r.pod(), r.container()
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		return []string{"the container has no securityContext"}
	}
	isTrue := func(b *bool) bool { return b != nil && *b }
	if !isTrue(sc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
		p = append(p, "runAsNonRoot is not true (pod or container)")
	}
	for _, uid := range []*int64{sc.RunAsUser, psc.RunAsUser} {
		if uid != nil && *uid == 0 {
			p = append(p, "runAsUser is 0")
		}
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		p = append(p, "readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		p = append(p, "allowPrivilegeEscalation is not false")
	}
	if isTrue(sc.Privileged) {
		p = append(p, "the container is privileged")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		p = append(p, "capabilities do not drop ALL")
	} else if len(sc.Capabilities.Add) > 0 {
		p = append(p, fmt.Sprintf("capabilities add %v", sc.Capabilities.Add))
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type == corev1.SeccompProfileTypeUnconfined {
		p = append(p, "no seccomp profile (want RuntimeDefault)")
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		p = append(p, "the pod shares a host namespace")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		p = append(p, "the pod mounts a service account token (bigseg never calls the Kubernetes API)")
	}
	// A Service whose name starts like a BIGSEG_ setting ("bigseg", "bigseg-redis") would
	// inject BIGSEG_*_PORT and BIGSEG_*_SERVICE_HOST variables into the server's environment.
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		p = append(p, "enableServiceLinks is not false: Services would inject BIGSEG_* variables")
	}
	return p
}

// checkSettingNames: every BIGSEG_* variable the chart sets is one the server reads; other
// variables are the Go runtime's, or the AWS SDK's own (with DynamoDB only).
func checkSettingNames(r *release, f *facts) []string {
	var p []string
	for _, name := range sortedKeys(r.env()) {
		switch {
		case strings.HasPrefix(name, "BIGSEG_"):
			if !f.known(name) {
				p = append(p, fmt.Sprintf("%s: `server -h` does not list it", name))
			}
		case name == "GOMEMLIMIT" || name == "GOMAXPROCS":
		case otelVariables[name]:
			if _, ok := r.env()["OTEL_EXPORTER_OTLP_ENDPOINT"]; !ok {
				p = append(p, fmt.Sprintf("%s: set without OTEL_EXPORTER_OTLP_ENDPOINT", name))
			}
		case name == "AWS_REGION" || name == "AWS_ENDPOINT_URL_DYNAMODB":
			if _, ok := r.env()["BIGSEG_DYNAMODB_TABLE"]; !ok {
				p = append(p, fmt.Sprintf("%s: set without BIGSEG_DYNAMODB_TABLE", name))
			}
		default:
			p = append(p, fmt.Sprintf("%s: neither a BIGSEG_ setting, the Go runtime's, the AWS SDK's nor OpenTelemetry's", name))
		}
	}
	seen := map[string]bool{}
	for _, e := range r.container().Env {
		if seen[e.Name] {
			p = append(p, fmt.Sprintf("env sets %s twice", e.Name))
		}
		seen[e.Name] = true
	}
	return p
}

// otelHeaders is the one variable that comes from a Secret through the environment: the
// OpenTelemetry SDK reads its OTLP headers (the collector's credentials) nowhere else.
const otelHeaders = "OTEL_EXPORTER_OTLP_HEADERS"

// otelVariables are the OpenTelemetry SDK's variables the chart sets (otel values).
var otelVariables = map[string]bool{"OTEL_EXPORTER_OTLP_ENDPOINT": true, "OTEL_EXPORTER_OTLP_PROTOCOL": true,
	otelHeaders: true, "OTEL_METRICS_EXPORTER": true}

// clearSecrets are settings that would hold a secret in the environment; the chart must
// never set them (their *_FILE twins instead).
var clearSecrets = []string{"BIGSEG_API_TOKENS"}

// fileSecretRE matches the settings naming files that hold secrets or TLS material: each must be
// a file of a mounted Secret.
var fileSecretRE = regexp.MustCompile(`^BIGSEG_.*_(PASSWORD|TOKENS|CERT|KEY|CA)_FILE$`)

func checkSecrets(r *release, _ *facts) []string {
	var p []string
	c := r.container()
	env := r.env()
	for _, name := range clearSecrets {
		if v, ok := env[name]; ok {
			p = append(p, fmt.Sprintf("%s is set (from %s): a secret in clear", name, v.source))
		}
	}
	for _, e := range c.Env {
		switch {
		case e.Name == otelHeaders && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil):
			p = append(p, fmt.Sprintf("%s is not from a Secret: the collector's credentials in clear", e.Name))
		case e.Name == otelHeaders: // the SDK reads its headers from the environment only: no file to mount
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			p = append(p, fmt.Sprintf("%s comes from Secret %s: secrets are mounted as files, never put in the environment", e.Name, e.ValueFrom.SecretKeyRef.Name))
		}
	}
	if _, ok := r.settings.Data[otelHeaders]; ok {
		p = append(p, fmt.Sprintf("%s is set in ConfigMap %s: the collector's credentials in clear", otelHeaders, r.settings.Name))
	}
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil {
			p = append(p, fmt.Sprintf("envFrom Secret %s: secrets are mounted as files, never put in the environment", ef.SecretRef.Name))
		}
	}
	for _, name := range []string{"BIGSEG_REDIS_URL", "BIGSEG_REDIS_CLUSTER_URL", "BIGSEG_REDIS_SENTINEL_URL"} {
		u, err := url.Parse(env[name].value)
		if err != nil {
			continue
		}
		if _, has := u.User.Password(); has || u.Query().Has("password") {
			p = append(p, name+" holds a password")
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range r.pod().Volumes {
		volumes[v.Name] = v
	}
	used := map[string]bool{}
	for _, name := range sortedKeys(env) {
		if !fileSecretRE.MatchString(name) {
			continue
		}
		path := env[name].value
		found := false
		for _, m := range c.VolumeMounts {
			rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
			v, isVolume := volumes[m.Name]
			if !ok || !isVolume || v.Secret == nil {
				continue
			}
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					found = true
					used[m.Name] = true
				}
			}
		}
		if !found {
			p = append(p, fmt.Sprintf("%s=%s is no file of a mounted Secret", name, path))
		}
	}
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" || m.SubPathExpr != "" {
			p = append(p, fmt.Sprintf("volume %s is mounted with subPath, which never sees a rotated Secret", m.Name))
		}
		if !m.ReadOnly {
			p = append(p, fmt.Sprintf("volume %s is mounted read-write", m.Name))
		}
	}
	fsGroup := r.pod().SecurityContext != nil && r.pod().SecurityContext.FSGroup != nil
	for _, v := range r.pod().Volumes {
		if v.Secret == nil {
			continue
		}
		if !used[v.Name] {
			p = append(p, fmt.Sprintf("Secret volume %s backs no *_FILE setting", v.Name))
		}
		mode := int32(0o644) // the API's default
		if v.Secret.DefaultMode != nil {
			mode = *v.Secret.DefaultMode
		}
		if mode&0o007 != 0 {
			p = append(p, fmt.Sprintf("Secret volume %s: mode %#o lets any user read it", v.Name, mode))
		}
		if mode&0o040 == 0 || !fsGroup {
			p = append(p, fmt.Sprintf("Secret volume %s: mode %#o with fsGroup set=%v: the non-root server cannot read it", v.Name, mode, fsGroup))
		}
	}
	return p
}

// listenPort is the port of a listen address such as ":8080", or "".
func listenPort(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return port
}

func checkProbes(r *release, f *facts) []string {
	var p []string
	env := r.env()
	c := r.container()
	ports := map[string]int32{}
	for _, cp := range c.Ports {
		ports[cp.Name] = cp.ContainerPort
	}
	// Which listener each container port is, from the server's own addresses.
	api, metrics := listenPort(env["BIGSEG_ADDR"].value), listenPort(env["BIGSEG_METRICS_ADDR"].value)
	if api == "" {
		api = listenPort(f.vars["BIGSEG_ADDR"].def)
	}
	if metrics == "" {
		p = append(p, "BIGSEG_METRICS_ADDR sets no port: no metrics listener for Prometheus and the probes under mutual TLS")
	}
	if strconv.Itoa(int(ports["http"])) != api {
		p = append(p, fmt.Sprintf("container port http is %d, but the server listens on port %q (BIGSEG_ADDR)", ports["http"], api))
	}
	if strconv.Itoa(int(ports["metrics"])) != metrics {
		p = append(p, fmt.Sprintf("container port metrics is %d, but the metrics listener is on port %q (BIGSEG_METRICS_ADDR)", ports["metrics"], metrics))
	}
	tlsOn := env["BIGSEG_TLS_CERT_FILE"].value != ""
	mutual := env["BIGSEG_TLS_CLIENT_CA_FILE"].value != ""
	metricsTLS := tlsOn && env["BIGSEG_METRICS_TLS"].value == "true"
	for kind, pr := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			p = append(p, fmt.Sprintf("no httpGet %s probe", kind))
			continue
		}
		g := pr.HTTPGet
		var port int32
		if g.Port.Type == intstr.String {
			port = ports[g.Port.StrVal]
		} else {
			port = g.Port.IntVal
		}
		var wantScheme corev1.URIScheme
		switch strconv.Itoa(int(port)) {
		case api:
			if mutual {
				p = append(p, fmt.Sprintf("%s probe on the API port, which requires client certificates kubelet cannot present", kind))
			}
			wantScheme = map[bool]corev1.URIScheme{true: corev1.URISchemeHTTPS, false: corev1.URISchemeHTTP}[tlsOn]
		case metrics:
			wantScheme = map[bool]corev1.URIScheme{true: corev1.URISchemeHTTPS, false: corev1.URISchemeHTTP}[metricsTLS]
			if mutual && metricsTLS {
				p = append(p, fmt.Sprintf("%s probe on a metrics port that requires client certificates", kind))
			}
		default:
			p = append(p, fmt.Sprintf("%s probe port %s is neither listener's (API %s, metrics %s)", kind, g.Port.String(), api, metrics))
			continue
		}
		scheme := g.Scheme
		if scheme == "" {
			scheme = corev1.URISchemeHTTP
		}
		if scheme != wantScheme {
			p = append(p, fmt.Sprintf("%s probe scheme %s, but that listener speaks %s", kind, scheme, wantScheme))
		}
	}
	// Readiness must notice the drain while the server still serves (BIGSEG_SHUTDOWN_DELAY).
	if rp := c.ReadinessProbe; rp != nil {
		delay, err := setting(env, f, "BIGSEG_SHUTDOWN_DELAY")
		notice := time.Duration(max(rp.PeriodSeconds, 1)*max(rp.FailureThreshold, 1)) * time.Second
		if err != nil {
			p = append(p, err.Error())
		} else if notice >= delay {
			p = append(p, fmt.Sprintf("readiness notices a drain after up to %v (periodSeconds x failureThreshold), not within BIGSEG_SHUTDOWN_DELAY %v", notice, delay))
		}
	}
	return p
}

// setting is a duration setting's effective value: the rendered one, else the server's
// default.
func setting(env map[string]envVar, f *facts, name string) (time.Duration, error) {
	s := f.vars[name].def
	if v, ok := env[name]; ok {
		s = v.value
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %v", name, s, err)
	}
	return d, nil
}

func checkGrace(r *release, f *facts) []string {
	env := r.env()
	delay, err1 := setting(env, f, "BIGSEG_SHUTDOWN_DELAY")
	timeout, err2 := setting(env, f, "BIGSEG_WRITE_TIMEOUT") // in-flight requests' time to finish
	if err1 != nil || err2 != nil {
		return []string{fmt.Sprint(err1, err2)}
	}
	grace := r.pod().TerminationGracePeriodSeconds
	if grace == nil {
		return []string{"no terminationGracePeriodSeconds (the default 30 s is not derived from the drain)"}
	}
	if g := time.Duration(*grace) * time.Second; g <= delay+timeout {
		return []string{fmt.Sprintf("terminationGracePeriodSeconds %v does not exceed BIGSEG_SHUTDOWN_DELAY %v + BIGSEG_WRITE_TIMEOUT %v: kubelet would kill requests still finishing", g, delay, timeout)}
	}
	return nil
}

func checkGoRuntime(r *release, _ *facts) []string {
	var p []string
	c := r.container()
	env := r.env()
	for name, req := range c.Resources.Requests {
		if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			p = append(p, fmt.Sprintf("%s request %s above its limit %s", name, req.String(), lim.String()))
		}
	}
	if mem, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		v, set := env["GOMEMLIMIT"]
		if !set || v.from != nil {
			p = append(p, "limits.memory is set but GOMEMLIMIT is not (as a value derived from it)")
		} else if b, err := goMemLimitBytes(v.value); err != nil {
			p = append(p, fmt.Sprintf("GOMEMLIMIT=%q: %v", v.value, err))
		} else if ratio := float64(b) / float64(mem.Value()); ratio < 0.5 || ratio > 0.95 {
			p = append(p, fmt.Sprintf("GOMEMLIMIT=%s is %.2f of limits.memory %s: want headroom (at most 0.95) without starving the heap (at least 0.5)", v.value, ratio, mem.String()))
		}
	} else if _, set := env["GOMEMLIMIT"]; set {
		p = append(p, "GOMEMLIMIT is set without a memory limit to derive it from")
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		v, set := env["GOMAXPROCS"]
		ref := (*corev1.ResourceFieldSelector)(nil)
		if set && v.from != nil {
			ref = v.from.ResourceFieldRef
		}
		switch {
		case ref == nil:
			p = append(p, "limits.cpu is set but GOMAXPROCS does not come from it (resourceFieldRef)")
		case ref.Resource != "limits.cpu" || (ref.ContainerName != "" && ref.ContainerName != c.Name):
			p = append(p, fmt.Sprintf("GOMAXPROCS comes from %s of container %q, not limits.cpu of %q", ref.Resource, ref.ContainerName, c.Name))
		case !ref.Divisor.IsZero() && ref.Divisor.MilliValue() != 1000:
			p = append(p, fmt.Sprintf("GOMAXPROCS divisor %s: want whole CPUs (1)", ref.Divisor.String()))
		}
	}
	return p
}
