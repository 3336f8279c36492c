package charttest

// Checks of the objects around the pods: the Service, the PodDisruptionBudget, the
// HorizontalPodAutoscaler, the NetworkPolicy and the monitoring objects.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

func checkService(r *release, f *facts) []string {
	var p []string
	env := r.env()
	containerPorts := map[string]bool{}
	for _, cp := range r.container().Ports {
		containerPorts[cp.Name] = true
	}
	byName := map[string]corev1.ServicePort{}
	for _, sp := range r.service.Spec.Ports {
		byName[sp.Name] = sp
		if sp.TargetPort.Type != intstr.String || !containerPorts[sp.TargetPort.StrVal] {
			p = append(p, fmt.Sprintf("Service port %s targets %s, not a named container port", sp.Name, sp.TargetPort.String()))
		}
	}
	tlsOn := env["BIGSEG_TLS_CERT_FILE"].value != ""
	for name, proto := range map[string]string{
		"http":    map[bool]string{true: "https", false: "http"}[tlsOn],
		"metrics": map[bool]string{true: "https", false: "http"}[tlsOn && env["BIGSEG_METRICS_TLS"].value == "true"],
	} {
		sp, ok := byName[name]
		switch {
		case !ok:
			p = append(p, fmt.Sprintf("the Service has no %s port", name))
		case sp.TargetPort.StrVal != name:
			p = append(p, fmt.Sprintf("Service port %s targets container port %s", name, sp.TargetPort.String()))
		case sp.AppProtocol == nil || *sp.AppProtocol != proto:
			p = append(p, fmt.Sprintf("Service port %s: appProtocol %s, want %s", name, deref(sp.AppProtocol), proto))
		}
	}
	if r.serviceAccount != nil {
		if r.pod().ServiceAccountName != r.serviceAccount.Name {
			p = append(p, fmt.Sprintf("the pods run as %q, not the chart's ServiceAccount %q", r.pod().ServiceAccountName, r.serviceAccount.Name))
		}
		if a := r.serviceAccount.AutomountServiceAccountToken; a == nil || *a {
			p = append(p, "the ServiceAccount automounts its token")
		}
	}
	return p
}

// checkRESP: the Redis-protocol listener has a container port where BIGSEG_RESP_ADDR listens
// and a Service port to it, or, when it is off, neither.
func checkRESP(r *release, _ *facts) []string {
	var p []string
	env := r.env()
	var container *corev1.ContainerPort
	for i, cp := range r.container().Ports {
		if cp.Name == "resp" {
			container = &r.container().Ports[i]
		}
	}
	var service *corev1.ServicePort
	for i, sp := range r.service.Spec.Ports {
		if sp.TargetPort.String() == "resp" {
			service = &r.service.Spec.Ports[i]
		}
	}
	addr, on := env["BIGSEG_RESP_ADDR"]
	if !on {
		if container != nil {
			p = append(p, fmt.Sprintf("container port resp (%d) without BIGSEG_RESP_ADDR: nothing listens there", container.ContainerPort))
		}
		if service != nil {
			p = append(p, fmt.Sprintf("Service port %s targets resp without BIGSEG_RESP_ADDR", service.Name))
		}
		return p
	}
	port := listenPort(addr.value)
	switch {
	case port == "":
		p = append(p, fmt.Sprintf("BIGSEG_RESP_ADDR=%q sets no port", addr.value))
	case container == nil:
		p = append(p, fmt.Sprintf("BIGSEG_RESP_ADDR=%s, but the container has no port named resp", addr.value))
	case strconv.Itoa(int(container.ContainerPort)) != port:
		p = append(p, fmt.Sprintf("container port resp is %d, but the Redis-protocol listener is on port %s (BIGSEG_RESP_ADDR)", container.ContainerPort, port))
	}
	if port != "" && (port == listenPort(env["BIGSEG_ADDR"].value) || port == listenPort(env["BIGSEG_METRICS_ADDR"].value)) {
		p = append(p, fmt.Sprintf("BIGSEG_RESP_ADDR=%s: the port of another listener", addr.value))
	}
	if service == nil {
		p = append(p, "the Service has no port to the Redis-protocol listener (targetPort resp)")
	} else if service.Protocol != corev1.ProtocolTCP {
		p = append(p, fmt.Sprintf("Service port %s: protocol %s, want TCP", service.Name, service.Protocol))
	}
	return p
}

// minReplicas is the fewest pods the Deployment runs: its replicas, or the HPA's minimum.
func (r *release) minReplicas() int32 {
	if r.hpa != nil && r.hpa.Spec.MinReplicas != nil {
		return *r.hpa.Spec.MinReplicas
	}
	if r.deployment.Spec.Replicas != nil {
		return *r.deployment.Spec.Replicas
	}
	return 1
}

func checkPDB(r *release, _ *facts) []string {
	if r.pdb == nil {
		return nil
	}
	s := r.pdb.Spec
	if (s.MinAvailable == nil) == (s.MaxUnavailable == nil) {
		return []string{"the PodDisruptionBudget needs exactly one of minAvailable and maxUnavailable"}
	}
	n := int(r.minReplicas())
	var allowed int
	if s.MaxUnavailable != nil {
		v, err := intstr.GetScaledValueFromIntOrPercent(s.MaxUnavailable, n, true)
		if err != nil {
			return []string{err.Error()}
		}
		allowed = v
	} else {
		v, err := intstr.GetScaledValueFromIntOrPercent(s.MinAvailable, n, true)
		if err != nil {
			return []string{err.Error()}
		}
		allowed = n - v
	}
	if allowed < 1 {
		return []string{fmt.Sprintf("with %d replicas the PodDisruptionBudget allows %d disruptions: node drains would block", n, allowed)}
	}
	return nil
}

func checkHPA(r *release, _ *facts) []string {
	if r.hpa == nil {
		return nil
	}
	var p []string
	s := r.hpa.Spec
	if s.MinReplicas == nil || *s.MinReplicas < 1 || *s.MinReplicas > s.MaxReplicas {
		p = append(p, fmt.Sprintf("minReplicas %d, maxReplicas %d: want 1 <= min <= max", deref(s.MinReplicas), s.MaxReplicas))
	}
	if r.deployment.Spec.Replicas != nil {
		p = append(p, "the Deployment sets replicas while an HPA scales it: every upgrade would reset the HPA's count")
	}
	if len(s.Metrics) == 0 {
		p = append(p, "the HPA has no metrics")
	}
	for _, m := range s.Metrics {
		if m.Resource == nil || m.Resource.Target.Type != "Utilization" {
			continue
		}
		if _, ok := r.container().Resources.Requests[m.Resource.Name]; !ok {
			p = append(p, fmt.Sprintf("the HPA targets %s utilization, but the container requests no %s", m.Resource.Name, m.Resource.Name))
		}
		if u := m.Resource.Target.AverageUtilization; u == nil || *u < 1 || *u > 100 {
			p = append(p, fmt.Sprintf("%s utilization target %d: want 1 to 100", m.Resource.Name, deref(u)))
		}
	}
	return p
}

func checkNetworkPolicy(r *release, _ *facts) []string {
	np := r.networkPolicy
	if np == nil {
		return nil
	}
	var p []string
	if !slices.Contains(np.Spec.PolicyTypes, "Ingress") {
		p = append(p, "the NetworkPolicy does not restrict ingress")
	}
	byName := map[string]int32{}
	for _, cp := range r.container().Ports {
		byName[cp.Name] = cp.ContainerPort
	}
	allowed := map[int32]bool{}
	for i, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			p = append(p, fmt.Sprintf("ingress rule %d opens every port", i))
		}
		for _, port := range rule.Ports {
			if port.Port == nil {
				p = append(p, fmt.Sprintf("ingress rule %d opens every port", i))
				continue
			}
			n := port.Port.IntVal
			if port.Port.Type == intstr.String {
				var ok bool
				if n, ok = byName[port.Port.StrVal]; !ok {
					p = append(p, fmt.Sprintf("ingress rule %d names port %s, which the container does not have", i, port.Port.StrVal))
				}
			}
			allowed[n] = true
		}
	}
	for name, n := range byName {
		if !allowed[n] {
			p = append(p, fmt.Sprintf("no ingress rule lets anything reach container port %s", name))
		}
	}
	if slices.Contains(np.Spec.PolicyTypes, "Egress") {
		dns := false
		for _, rule := range np.Spec.Egress {
			for _, port := range rule.Ports {
				dns = dns || (port.Port != nil && port.Port.IntValue() == 53)
			}
		}
		if !dns {
			p = append(p, "egress is restricted without allowing DNS (port 53): Redis names would not resolve")
		}
		if _, ok := r.env()["BIGSEG_DYNAMODB_TABLE"]; ok && !egressAllows(np, 443) {
			p = append(p, "egress is restricted without allowing HTTPS (port 443): DynamoDB would be unreachable")
		}
		if port, ok := otelPort(r.env()["OTEL_EXPORTER_OTLP_ENDPOINT"].value); ok && !egressAllows(np, port) {
			p = append(p, fmt.Sprintf("egress is restricted without allowing the OpenTelemetry collector's port %d", port))
		}
	}
	return p
}

// egressAllows reports whether an egress rule of np lets TCP port through (a rule without
// ports lets every port through).
func egressAllows(np *networkingv1.NetworkPolicy, port int) bool {
	for _, rule := range np.Spec.Egress {
		if len(rule.Ports) == 0 {
			return true
		}
		for _, pp := range rule.Ports {
			if pp.Port == nil || pp.Port.IntValue() == port {
				return true
			}
		}
	}
	return false
}

// alertJobs are the job label values the alert rules select on, e.g. job="bigseg".
func alertJobs(f *facts) []string {
	var jobs []string
	for _, m := range regexp.MustCompile(`job="([^"]*)"`).FindAllStringSubmatch(string(f.alerts), -1) {
		if !slices.Contains(jobs, m[1]) {
			jobs = append(jobs, m[1])
		}
	}
	return jobs
}

func checkServiceMonitor(r *release, f *facts) []string {
	sm := r.serviceMonitor
	if sm == nil {
		return nil
	}
	var p []string
	if len(sm.Spec.Endpoints) != 1 {
		return []string{fmt.Sprintf("the ServiceMonitor has %d endpoints, want 1 (the metrics port)", len(sm.Spec.Endpoints))}
	}
	ep := sm.Spec.Endpoints[0]
	var target *corev1.ServicePort
	for i, sp := range r.service.Spec.Ports {
		if sp.Name == ep.Port {
			target = &r.service.Spec.Ports[i]
		}
	}
	if target == nil || target.TargetPort.String() != "metrics" {
		p = append(p, fmt.Sprintf("the ServiceMonitor scrapes Service port %q, which is not the one targeting the container's metrics port", ep.Port))
	}
	if ep.Path != "/metrics" {
		p = append(p, fmt.Sprintf("the ServiceMonitor scrapes path %q, not /metrics", ep.Path))
	}
	env := r.env()
	want := "http"
	if env["BIGSEG_TLS_CERT_FILE"].value != "" && env["BIGSEG_METRICS_TLS"].value == "true" {
		want = "https"
	}
	if ep.Scheme == nil || ep.Scheme.String() != want {
		p = append(p, fmt.Sprintf("the ServiceMonitor scrapes with scheme %q, but the metrics listener speaks %s", deref(ep.Scheme), want))
	}
	for _, d := range []monitoringv1.Duration{ep.Interval, ep.ScrapeTimeout} {
		if d != "" {
			if _, err := time.ParseDuration(string(d)); err != nil {
				p = append(p, fmt.Sprintf("the ServiceMonitor's duration %q: %v", d, err))
			}
		}
	}
	// The job label the targets get must be the one the alert rules select.
	job := r.service.Name // prometheus-operator's default: the Service's name
	if sm.Spec.JobLabel != "" {
		job = r.service.Labels[sm.Spec.JobLabel]
	}
	for _, rl := range ep.RelabelConfigs {
		if rl.TargetLabel == "job" && (rl.Action == "" || rl.Action == "replace") && len(rl.SourceLabels) == 0 && rl.Replacement != nil {
			job = *rl.Replacement
		}
	}
	for _, j := range alertJobs(f) {
		if j != job {
			p = append(p, fmt.Sprintf("the targets get job=%q, but alerts.yml selects job=%q", job, j))
		}
	}
	return p
}

func checkPrometheusRule(r *release, f *facts) []string {
	if r.rule == nil {
		return nil
	}
	var want struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(f.alerts, &want); err != nil {
		return []string{fmt.Sprintf("deploy/prometheus/alerts.yml does not decode strictly into PrometheusRule groups: %v", err)}
	}
	if len(want.Groups) == 0 {
		return []string{"deploy/prometheus/alerts.yml has no groups"}
	}
	if d := cmp.Diff(want.Groups, r.rule.Spec.Groups); d != "" {
		return []string{"the PrometheusRule's groups differ from deploy/prometheus/alerts.yml (-file +rendered):\n" + d}
	}
	return nil
}

// dashboardDatasource is the uid the chart substitutes for ${DS_PROMETHEUS} by default.
const dashboardDatasource = "prometheus"

func checkDashboard(r *release, f *facts) []string {
	if r.dashboard == nil {
		return nil
	}
	var p []string
	got := r.dashboard.Data["bigseg.json"]
	want := strings.ReplaceAll(string(f.dashboard), "${DS_PROMETHEUS}", dashboardDatasource)
	if got != want {
		p = append(p, fmt.Sprintf("the dashboard ConfigMap is not deploy/grafana/bigseg.json with ${DS_PROMETHEUS} = %q (%d bytes, want %d)", dashboardDatasource, len(got), len(want)))
	}
	if !json.Valid([]byte(got)) {
		p = append(p, "the dashboard is not valid JSON")
	}
	if strings.Contains(got, "${DS_") {
		p = append(p, "the dashboard still asks for a data source input, which provisioned dashboards cannot answer")
	}
	if r.dashboard.Labels["grafana_dashboard"] == "" {
		p = append(p, "the dashboard ConfigMap lacks the grafana_dashboard label the sidecar looks for")
	}
	if n := len(got); n > 1<<20 {
		p = append(p, fmt.Sprintf("the dashboard is %d bytes, over a ConfigMap's 1 MiB", n))
	}
	return p
}

// deref is *v, or v's zero value when v is nil.
func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}

// quantityMiB is floor(bytes * pct / 100) in MiB, as GOMEMLIMIT should be.
func quantityMiB(bytes int64, pct float64) int64 {
	return int64(math.Floor(float64(bytes) * pct / 100 / (1 << 20)))
}

// otelPort is the port of an OTLP endpoint URL: its own, else its scheme's; false for none.
func otelPort(endpoint string) (int, bool) {
	u, err := url.Parse(endpoint)
	if endpoint == "" || err != nil {
		return 0, false
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p, true
	}
	if u.Scheme == "https" {
		return 443, true
	}
	return 80, true
}
