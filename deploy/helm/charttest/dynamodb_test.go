package charttest

import (
	"strings"
	"testing"
)

// TestDynamoDB: dynamodb.table renders BIGSEG_DYNAMODB_TABLE and
// BIGSEG_DYNAMODB_CONSISTENT_READ (true unless said otherwise), dynamodb.region the AWS SDK's
// own AWS_REGION and dynamodb.endpoint AWS_ENDPOINT_URL_DYNAMODB, never a BIGSEG_ variable of
// their own; without a table none of them is set. The service account carries the IRSA role
// annotation as given, and still mounts no Kubernetes API token.
func TestDynamoDB(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         map[string]string // variable: value; "" for unset
	}{
		{"table and region", "dynamodb: {table: launchdarkly-big-segments, region: eu-west-1}", map[string]string{
			"BIGSEG_DYNAMODB_TABLE": "launchdarkly-big-segments", "BIGSEG_DYNAMODB_CONSISTENT_READ": "true",
			"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL_DYNAMODB": "",
		}},
		{"a table's ARN eventually consistent with an endpoint", "dynamodb: {table: 'arn:aws:dynamodb:eu-west-1:123456789012:table/ld', consistentRead: false, endpoint: 'http://dynamodb-local:8000'}", map[string]string{
			"BIGSEG_DYNAMODB_TABLE": "arn:aws:dynamodb:eu-west-1:123456789012:table/ld", "BIGSEG_DYNAMODB_CONSISTENT_READ": "false",
			"AWS_REGION": "", "AWS_ENDPOINT_URL_DYNAMODB": "http://dynamodb-local:8000",
		}},
		{"no table", "redis: {url: 'redis://r:6379'}", map[string]string{
			"BIGSEG_DYNAMODB_TABLE": "", "BIGSEG_DYNAMODB_CONSISTENT_READ": "", "AWS_REGION": "", "AWS_ENDPOINT_URL_DYNAMODB": "",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := render(t, writeValues(t, tc.values)).env()
			for name, want := range tc.want {
				v, set := env[name]
				switch {
				case want == "" && set:
					t.Errorf("%s=%q is set (%s)", name, v.value, v.source)
				case want != "" && (!set || v.value != want):
					t.Errorf("%s=%q (set: %v), want %q", name, v.value, set, want)
				}
				if strings.HasPrefix(name, "AWS_") && set && v.source != "env" {
					t.Errorf("%s comes from %s, want the container's env", name, v.source)
				}
			}
			for name := range env {
				if strings.Contains(name, "REGION") && name != "AWS_REGION" || strings.Contains(name, "ENDPOINT") && name != "AWS_ENDPOINT_URL_DYNAMODB" {
					t.Errorf("%s: the AWS SDK's settings are its own variables", name)
				}
			}
		})
	}
	r := render(t, valuesFiles(t)["dynamodb"])
	const role = "arn:aws:iam::123456789012:role/bigseg-read"
	if r.serviceAccount == nil || r.serviceAccount.Annotations["eks.amazonaws.com/role-arn"] != role {
		t.Errorf("the service account does not carry the IRSA role annotation %s: %+v", role, r.serviceAccount)
	}
	if a := r.serviceAccount.AutomountServiceAccountToken; a == nil || *a {
		t.Error("the service account mounts a Kubernetes API token")
	}
	if !egressAllows(r.networkPolicy, 443) {
		t.Error("the NetworkPolicy's egress does not allow HTTPS")
	}
}
