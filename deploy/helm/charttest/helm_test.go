package charttest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "../bigseg"
	valuesDir   = "testdata/values"
	releaseName = "demo"
	namespace   = "bigseg"
)

// helmBin is the helm binary: $HELM, else helm on PATH. ci.sh installs it when missing.
var helmBin = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("HELM"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("helm")
	if err != nil {
		return "", errors.New("helm not found: install it (go install helm.sh/helm/v3/cmd/helm@v3.22.0) or set HELM; deploy/helm/ci.sh does")
	}
	return p, nil
})

// runHelm runs helm with args and returns its standard output; an error carries its standard
// error (helm notes the chart's symbolic links there, which is not an error).
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := helmBin()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v: %s%s", strings.Join(args, " "), err, stdout.String(), strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// template renders the chart with the given values files (and extra helm flags), as the
// release "demo" in namespace "bigseg".
func template(t *testing.T, valuesFiles []string, flags ...string) (string, error) {
	t.Helper()
	args := []string{"template", releaseName, chartDir, "--namespace", namespace}
	for _, f := range valuesFiles {
		args = append(args, "-f", f)
	}
	return runHelm(t, append(args, flags...)...)
}

// writeValues writes a values file for one test and returns its path.
func writeValues(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// withStore is a values file setting the one value the chart requires, a store (standalone
// Redis), then one of the given values, which may override it: for tests about other values.
func withStore(t *testing.T, values string) []string {
	t.Helper()
	return []string{writeValues(t, "redis: {url: 'redis://redis-master.redis.svc:6379'}\n"), writeValues(t, values)}
}

// valuesFiles lists testdata/values/*.yaml by name (without .yaml) and path.
func valuesFiles(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(valuesDir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no values files in %s (%v)", valuesDir, err)
	}
	out := map[string]string{}
	for _, p := range paths {
		out[strings.TrimSuffix(filepath.Base(p), ".yaml")] = p
	}
	return out
}

// sortedKeys returns m's keys in order, so that subtests and messages come in a stable order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// release is one rendering of the chart, every object decoded into its API type.
type release struct {
	objects        []metav1.Object // every object, in the order rendered
	kinds          []string        // "Kind/name" of each object, same order
	deployment     *appsv1.Deployment
	settings       *corev1.ConfigMap // the ConfigMap the container's envFrom reads
	scanner        *release          // inventory.scanner's Deployment and ConfigMap, if rendered
	dashboard      *corev1.ConfigMap // the Grafana dashboard, if rendered
	service        *corev1.Service
	serviceAccount *corev1.ServiceAccount
	pdb            *policyv1.PodDisruptionBudget
	hpa            *autoscalingv2.HorizontalPodAutoscaler
	networkPolicy  *networkingv1.NetworkPolicy
	serviceMonitor *monitoringv1.ServiceMonitor
	rule           *monitoringv1.PrometheusRule
}

// decode splits helm's output into documents and decodes each strictly (unknown and
// duplicate fields are errors) into the type its apiVersion and kind name. A kind the chart
// is not expected to render is an error too.
func decode(manifest string) (*release, error) {
	r := &release{}
	var configMaps []*corev1.ConfigMap
	var deployments []*appsv1.Deployment
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("split documents: %w", err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("read kind: %w\n%s", err, doc)
		}
		if tm.Kind == "" && tm.APIVersion == "" {
			if len(bytes.TrimSpace(stripComments(doc))) != 0 {
				return nil, fmt.Errorf("a document without apiVersion and kind:\n%s", doc)
			}
			continue
		}
		var obj metav1.Object
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			d := &appsv1.Deployment{}
			deployments = append(deployments, d)
			obj = d
		case "v1 ConfigMap":
			cm := &corev1.ConfigMap{}
			configMaps = append(configMaps, cm)
			obj = cm
		case "v1 Service":
			if r.service != nil {
				return nil, errors.New("two Services")
			}
			r.service = &corev1.Service{}
			obj = r.service
		case "v1 ServiceAccount":
			r.serviceAccount = &corev1.ServiceAccount{}
			obj = r.serviceAccount
		case "policy/v1 PodDisruptionBudget":
			r.pdb = &policyv1.PodDisruptionBudget{}
			obj = r.pdb
		case "autoscaling/v2 HorizontalPodAutoscaler":
			r.hpa = &autoscalingv2.HorizontalPodAutoscaler{}
			obj = r.hpa
		case "networking.k8s.io/v1 NetworkPolicy":
			r.networkPolicy = &networkingv1.NetworkPolicy{}
			obj = r.networkPolicy
		case "monitoring.coreos.com/v1 ServiceMonitor":
			r.serviceMonitor = &monitoringv1.ServiceMonitor{}
			obj = r.serviceMonitor
		case "monitoring.coreos.com/v1 PrometheusRule":
			r.rule = &monitoringv1.PrometheusRule{}
			obj = r.rule
		default:
			return nil, fmt.Errorf("unexpected object %s %s", tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", tm.Kind, err)
		}
		r.objects = append(r.objects, obj)
		r.kinds = append(r.kinds, tm.Kind+"/"+obj.GetName())
	}
	for _, d := range deployments {
		switch {
		case strings.HasSuffix(d.Name, "-inventory-scanner") && r.scanner == nil:
			r.scanner = &release{deployment: d}
		case r.deployment == nil:
			r.deployment = d
		default:
			return nil, errors.New("two Deployments")
		}
	}
	if r.deployment == nil {
		return nil, errors.New("no Deployment")
	}
	envFrom := map[string]*release{}
	for _, d := range []*release{r, r.scanner} {
		if d == nil {
			continue
		}
		if len(d.pod().Containers) != 1 {
			return nil, fmt.Errorf("the Deployment %s has %d containers, want 1", d.deployment.Name, len(d.pod().Containers))
		}
		for _, ef := range d.container().EnvFrom {
			if ef.ConfigMapRef != nil {
				envFrom[ef.ConfigMapRef.Name] = d
			}
		}
	}
	for _, cm := range configMaps {
		switch {
		case envFrom[cm.Name] != nil:
			envFrom[cm.Name].settings = cm
		case cm.Data["bigseg.json"] != "":
			r.dashboard = cm
		default:
			return nil, fmt.Errorf("ConfigMap %s: neither the container's settings nor the dashboard", cm.Name)
		}
	}
	if r.settings == nil || r.scanner != nil && r.scanner.settings == nil {
		return nil, errors.New("a container reads no rendered ConfigMap")
	}
	return r, nil
}

// stripComments drops YAML comment lines (helm starts each document with "# Source: ...").
func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for line := range strings.Lines(string(doc)) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out.WriteString(line)
		}
	}
	return out.Bytes()
}

// render renders and decodes, failing the test on any error.
func render(t *testing.T, valuesFiles ...string) *release {
	t.Helper()
	out, err := template(t, valuesFiles)
	if err != nil {
		t.Fatal(err)
	}
	r, err := decode(out)
	if err != nil {
		t.Fatalf("decode the rendered chart: %v", err)
	}
	return r
}

func (r *release) pod() *corev1.PodSpec { return &r.deployment.Spec.Template.Spec }

func (r *release) container() *corev1.Container { return &r.pod().Containers[0] }

// envVar is one variable of the container's environment, and where it comes from.
type envVar struct {
	value  string
	from   *corev1.EnvVarSource // valueFrom, for variables kubelet fills in
	source string               // "ConfigMap <name>" or "env"
}

// env is the container's environment as kubelet builds it: the envFrom ConfigMaps, then env,
// which wins. Secrets in envFrom are reported by checkSecrets, not here.
func (r *release) env() map[string]envVar {
	out := map[string]envVar{}
	for _, ef := range r.container().EnvFrom {
		if ef.ConfigMapRef != nil && ef.ConfigMapRef.Name == r.settings.Name {
			for k, v := range r.settings.Data {
				out[ef.Prefix+k] = envVar{value: v, source: "ConfigMap " + r.settings.Name}
			}
		}
	}
	for _, e := range r.container().Env {
		out[e.Name] = envVar{value: e.Value, from: e.ValueFrom, source: "env"}
	}
	return out
}
