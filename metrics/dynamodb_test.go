package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bigseg/bigseg/metrics"
)

var (
	dynamoOps   = []string{"BatchGetItem", "Query"}
	dynamoCodes = []string{"ThrottlingException", "http_5xx", "other"}
)

func TestDynamoDBCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := metrics.New(reg).DynamoDB(dynamoOps, dynamoCodes)
	d.Request("BatchGetItem", "", 3*time.Millisecond)
	d.Request("BatchGetItem", "", 5*time.Millisecond)
	d.Request("BatchGetItem", "ThrottlingException", time.Millisecond)
	d.ConsumedReadCapacity("BatchGetItem", 1.5)
	d.ConsumedReadCapacity("BatchGetItem", 0.5)
	d.UnprocessedRetried(3)
	want := `
# HELP bigseg_dynamodb_consumed_read_capacity_units_total Read capacity units that DynamoDB's answers say bigseg's requests consumed, by operation.
# TYPE bigseg_dynamodb_consumed_read_capacity_units_total counter
bigseg_dynamodb_consumed_read_capacity_units_total{operation="BatchGetItem"} 2
# HELP bigseg_dynamodb_requests_total Requests sent to DynamoDB (each attempt of a retried call), by operation and code (ok, or the error's code, such as ThrottlingException).
# TYPE bigseg_dynamodb_requests_total counter
bigseg_dynamodb_requests_total{code="ThrottlingException",operation="BatchGetItem"} 1
bigseg_dynamodb_requests_total{code="ok",operation="BatchGetItem"} 2
# HELP bigseg_dynamodb_unprocessed_keys_retried_total Keys that a BatchGetItem answer left unprocessed (throttling, an answer over 16 MB) and that a read asked for again.
# TYPE bigseg_dynamodb_unprocessed_keys_retried_total counter
bigseg_dynamodb_unprocessed_keys_retried_total 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"bigseg_dynamodb_requests_total", "bigseg_dynamodb_consumed_read_capacity_units_total", "bigseg_dynamodb_unprocessed_keys_retried_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "bigseg_dynamodb_request_duration_seconds"); n != 1 {
		t.Errorf("%d duration series, want 1 (by operation only)", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// Whatever operations and codes the observer is told of, the series are those of the fixed
// sets it was made with, plus ok and other.
func TestDynamoDBSeriesBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := metrics.New(reg).DynamoDB(dynamoOps, dynamoCodes)
	for i := range 1000 {
		op, code := dynamoOps[i%len(dynamoOps)], dynamoCodes[i%len(dynamoCodes)]
		if i%2 == 0 {
			op, code = fmt.Sprintf("Op%d", i), fmt.Sprintf("alice@example.com-%d", i)
		}
		d.Request(op, code, time.Millisecond)
		d.Request(op, "", time.Millisecond)
		d.ConsumedReadCapacity(op, 1)
	}
	ops, codes := len(dynamoOps)+1, len(dynamoCodes)+1 // + other; + ok (other is in the set)
	for name, most := range map[string]int{
		"bigseg_dynamodb_requests_total":                     ops * codes,
		"bigseg_dynamodb_request_duration_seconds":           ops,
		"bigseg_dynamodb_consumed_read_capacity_units_total": ops,
	} {
		if n := testutil.CollectAndCount(reg, name); n == 0 || n > most {
			t.Errorf("%s: %d series, want 1 to %d", name, n, most)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "alice") || strings.HasPrefix(l.GetValue(), "Op") {
					t.Errorf("%s has the label %s=%q", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}
