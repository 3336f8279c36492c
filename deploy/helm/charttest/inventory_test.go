package charttest

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestInventory: the inventory values render the three BIGSEG_INVENTORY_* settings, and no
// scanner unless asked for.
func TestInventory(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         [3]string
	}{
		{"defaults", "", [3]string{"1h", "1000", "100"}},
		{"tuned", "inventory: {interval: 10m, readsPerSecond: 250, maxSegments: 0}", [3]string{"10m", "250", "0"}},
		{"off", "inventory: {interval: 0s}", [3]string{"0s", "1000", "100"}},
		{"off as a number", "inventory: {interval: 0}", [3]string{"0", "1000", "100"}},
		{"the least", "inventory: {interval: 1000ms, readsPerSecond: 1, maxSegments: 10000}", [3]string{"1000ms", "1", "10000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, withStore(t, tc.values)...)
			for i, name := range []string{"BIGSEG_INVENTORY_INTERVAL", "BIGSEG_INVENTORY_READS_PER_SECOND", "BIGSEG_INVENTORY_MAX_SEGMENTS"} {
				if got := r.settings.Data[name]; got != tc.want[i] {
					t.Errorf("%s=%q, want %q", name, got, tc.want[i])
				}
			}
			if r.scanner != nil {
				t.Errorf("a scanner Deployment without inventory.scanner.enabled: %s", r.scanner.deployment.Name)
			}
		})
	}
}

// TestInventoryScanner: inventory.scanner renders one more bigseg, one replica, with the
// servers' settings but its own store user (Redis URL and password Secret, or service
// account), behind no Service and outside the servers' selectors, inside their NetworkPolicy.
func TestInventoryScanner(t *testing.T) {
	r := render(t, writeValues(t, `
redis: {url: 'redis://bigseg@redis:6379', passwordSecret: {name: bigseg-redis}}
inventory:
  interval: 15m
  scanner: {enabled: true, redisURL: 'redis://bigseg-scanner@redis:6379', passwordSecret: {name: bigseg-scanner-redis}}
networkPolicy: {enabled: true}
`))
	s := r.scanner
	if s == nil {
		t.Fatalf("no scanner Deployment: %v", r.kinds)
	}
	if s.deployment.Spec.Replicas == nil || *s.deployment.Spec.Replicas != 1 {
		t.Errorf("scanner replicas %v, want 1", s.deployment.Spec.Replicas)
	}
	want := maps.Clone(r.settings.Data)
	want["BIGSEG_REDIS_URL"] = "redis://bigseg-scanner@redis:6379"
	if !maps.Equal(s.settings.Data, want) {
		t.Errorf("scanner settings %v, want the servers' but for the URL: %v", s.settings.Data, want)
	}
	secretOf := func(p *corev1.PodSpec) string {
		for _, v := range p.Volumes {
			if v.Name == "redis-password" && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
		return ""
	}
	if a, b := secretOf(r.pod()), secretOf(s.pod()); a != "bigseg-redis" || b != "bigseg-scanner-redis" {
		t.Errorf("password Secrets: servers %q, scanner %q", a, b)
	}
	podLabels := labels.Set(s.deployment.Spec.Template.Labels)
	for what, sel := range map[string]map[string]string{"the Service": r.service.Spec.Selector,
		"the servers' Deployment": r.deployment.Spec.Selector.MatchLabels, "the PodDisruptionBudget": r.pdb.Spec.Selector.MatchLabels} {
		if labels.SelectorFromSet(sel).Matches(podLabels) {
			t.Errorf("%s selects the scanner's pods", what)
		}
	}
	if labels.SelectorFromSet(s.deployment.Spec.Selector.MatchLabels).Matches(labels.Set(r.deployment.Spec.Template.Labels)) {
		t.Error("the scanner's selector selects the servers' pods")
	}
	np, err := metav1LabelSelector(r)
	if err != nil {
		t.Fatal(err)
	}
	if !np.Matches(podLabels) || !np.Matches(labels.Set(r.deployment.Spec.Template.Labels)) {
		t.Error("the NetworkPolicy does not cover both the servers and the scanner")
	}

	d := render(t, writeValues(t, `
dynamodb: {table: ld, region: eu-west-1}
inventory: {scanner: {enabled: true, serviceAccountName: bigseg-scanner}}
`))
	if d.scanner == nil || d.scanner.pod().ServiceAccountName != "bigseg-scanner" || d.pod().ServiceAccountName == "bigseg-scanner" {
		t.Errorf("service accounts: servers %q, scanner %v", d.pod().ServiceAccountName, d.scanner)
	}
}

// metav1LabelSelector is the NetworkPolicy's pod selector.
func metav1LabelSelector(r *release) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(&r.networkPolicy.Spec.PodSelector)
}
