package charttest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// respRendering is what the chart renders for the Redis-protocol listener.
type respRendering struct {
	Addr                       string // BIGSEG_RESP_ADDR ("" for unset)
	TLS                        bool   // under TLS: BIGSEG_TLS_CERT_FILE set
	ContainerPort, ServicePort int32  // the ports named resp (0 for none)
	AppProtocol                string // of the Service port
	Peers                      []networkingv1.NetworkPolicyPeer
	RuleForIt                  bool // the NetworkPolicy has an ingress rule for port resp
}

// TestRESPListener: resp.enabled renders BIGSEG_RESP_ADDR, a container port, a Service port
// and a NetworkPolicy rule, all named resp, under TLS with tls.enabled; off, none of them.
func TestRESPListener(t *testing.T) {
	sdks := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "sdk"}}}}
	for _, tc := range []struct {
		name, values string
		want         respRendering
	}{
		{"off by default", "networkPolicy: {enabled: true}", respRendering{}},
		{"off with ports set", "ports: {resp: 7000}\nservice: {respPort: 7000}\nnetworkPolicy: {enabled: true}", respRendering{}},
		{"on", "resp: {enabled: true}\nnetworkPolicy: {enabled: true}",
			respRendering{Addr: ":6380", ContainerPort: 6380, ServicePort: 6380, AppProtocol: "redis", RuleForIt: true}},
		{"on other ports from the SDKs only", "resp: {enabled: true}\nports: {resp: 7379}\nservice: {respPort: 6379}\nnetworkPolicy: {enabled: true, respFrom: [{podSelector: {matchLabels: {role: sdk}}}]}",
			respRendering{Addr: ":7379", ContainerPort: 7379, ServicePort: 6379, AppProtocol: "redis", Peers: sdks, RuleForIt: true}},
		{"under TLS", "resp: {enabled: true}\ntls: {enabled: true, secretName: bigseg-tls}",
			respRendering{Addr: ":6380", TLS: true, ContainerPort: 6380, ServicePort: 6380, AppProtocol: "redis"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, withStore(t, tc.values)...)
			env := r.env()
			got := respRendering{Addr: env["BIGSEG_RESP_ADDR"].value}
			if got.Addr != "" {
				got.TLS = env["BIGSEG_TLS_CERT_FILE"].value != ""
			}
			for _, cp := range r.container().Ports {
				if cp.Name == "resp" {
					got.ContainerPort = cp.ContainerPort
				}
			}
			for _, sp := range r.service.Spec.Ports {
				if sp.Name == "resp" && sp.TargetPort.String() == "resp" {
					got.ServicePort, got.AppProtocol = sp.Port, deref(sp.AppProtocol)
				}
			}
			if np := r.networkPolicy; np != nil {
				for _, rule := range np.Spec.Ingress {
					for _, port := range rule.Ports {
						if port.Port != nil && port.Port.String() == "resp" {
							got.RuleForIt, got.Peers = true, rule.From
						}
					}
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("the Redis-protocol listener renders (-want +got):\n%s", d)
			}
		})
	}
}
