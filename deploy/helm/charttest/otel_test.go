package charttest

import (
	"strings"
	"testing"
)

// TestOTel: otel.endpoint renders OTEL_EXPORTER_OTLP_ENDPOINT, otel.protocol
// OTEL_EXPORTER_OTLP_PROTOCOL, otel.metrics OTEL_METRICS_EXPORTER=otlp, each in the
// container's env and only when set, never a BIGSEG_ variable of their own; otel.headersSecret
// renders OTEL_EXPORTER_OTLP_HEADERS from a secretKeyRef, never a value. Without an endpoint
// none of them is set (nothing dials a collector). A restricted egress gets a rule for the
// endpoint's port (its own, else its scheme's), to otel.egressTo.
func TestOTel(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         map[string]string // variable: value; "" for unset; "secret:name/key" for a secretKeyRef
	}{
		{"endpoint only", "otel: {endpoint: 'http://otel-collector.observability:4318'}", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "",
			"OTEL_EXPORTER_OTLP_HEADERS": "", "OTEL_METRICS_EXPORTER": "",
		}},
		{"everything", "otel: {endpoint: 'https://collector:4317', protocol: grpc, headersSecret: {name: collector, key: h}, metrics: true}", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_HEADERS": "secret:collector/h", "OTEL_METRICS_EXPORTER": "otlp",
		}},
		{"nothing", "{}", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_PROTOCOL": "", "OTEL_EXPORTER_OTLP_HEADERS": "", "OTEL_METRICS_EXPORTER": "",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := render(t, withStore(t, tc.values)...).env()
			for name, want := range tc.want {
				v, set := env[name]
				got := v.value
				if v.from != nil && v.from.SecretKeyRef != nil {
					got = "secret:" + v.from.SecretKeyRef.Name + "/" + v.from.SecretKeyRef.Key
				}
				switch {
				case want == "" && set:
					t.Errorf("%s=%q is set (%s)", name, got, v.source)
				case want != "" && (!set || got != want):
					t.Errorf("%s=%q (set: %v), want %q", name, got, set, want)
				case set && v.source != "env":
					t.Errorf("%s comes from %s, want the container's env", name, v.source)
				}
			}
			for name := range env {
				if strings.Contains(name, "OTEL") && !strings.HasPrefix(name, "OTEL_") {
					t.Errorf("%s: OpenTelemetry's settings are its own variables", name)
				}
			}
		})
	}
	for _, tc := range []struct {
		endpoint string
		port     int
	}{{"http://collector:4318", 4318}, {"https://collector", 443}, {"http://collector/otlp", 80}} {
		r := render(t, withStore(t, "otel: {endpoint: '"+tc.endpoint+"'}\nnetworkPolicy: {enabled: true, egress: [{ports: [{port: 53, protocol: UDP}]}]}")...)
		if !egressAllows(r.networkPolicy, tc.port) {
			t.Errorf("endpoint %s: the NetworkPolicy's egress does not allow port %d", tc.endpoint, tc.port)
		}
	}
	r := render(t, valuesFiles(t)["otel"])
	last := r.networkPolicy.Spec.Egress[len(r.networkPolicy.Spec.Egress)-1]
	if len(last.To) != 1 || last.To[0].NamespaceSelector == nil {
		t.Errorf("the collector's egress rule is not to otel.egressTo: %+v", last)
	}
}

// TestOTelRefused: values the chart refuses, naming them.
func TestOTelRefused(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"a protocol without an endpoint", "otel: {protocol: grpc}", "only with otel.endpoint"},
		{"metrics without an endpoint", "otel: {metrics: true}", "only with otel.endpoint"},
		{"headers without an endpoint", "otel: {headersSecret: {name: x}}", "only with otel.endpoint"},
		{"an endpoint without a scheme", "otel: {endpoint: 'collector:4317'}", "otel.endpoint"},
		{"credentials in the endpoint", "otel: {endpoint: 'http://user:secret@collector:4318'}", "otel.headersSecret"},
		{"an unknown protocol", "otel: {endpoint: 'http://collector:4318', protocol: http/json}", "otel.protocol"},
		{"a headers Secret without a key", "otel: {endpoint: 'http://collector:4318', headersSecret: {name: x, key: ''}}", "otel.headersSecret.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, []string{writeValues(t, tc.values)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}
