package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DynamoDB is the observer of a DynamoDB client's requests (a storage/dynamodb.Observer,
// without this package depending on it): what DynamoDB itself was asked and answered, each
// attempt of a call the SDK retries apart, beside bigseg_store_request_duration_seconds's
// reads as the domain sees them. Its labels are only operations and codes of the fixed sets
// it was made with, anything else counted as "other": never text of a request or an answer.
type DynamoDB struct {
	operations, codes []string
	requests          *prometheus.CounterVec   // operation, code
	durations         *prometheus.HistogramVec // operation
	capacity          *prometheus.CounterVec   // operation
	unprocessed       prometheus.Counter
}

// DynamoDB registers the DynamoDB metrics, labelled only with operations and codes (an
// error's code, as storage/dynamodb's ErrorCode gives it; "ok" is a success's), and returns
// their observer. Series appear as requests are made, so a scrape only has those seen.
func (m *Metrics) DynamoDB(operations, codes []string) *DynamoDB {
	d := &DynamoDB{
		operations: slices.Clone(operations),
		codes:      slices.Clone(codes),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bigseg_dynamodb_requests_total",
			Help: "Requests sent to DynamoDB (each attempt of a retried call), by operation and code (ok, or the error's code, such as ThrottlingException)."},
			[]string{"operation", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bigseg_dynamodb_request_duration_seconds",
			Help: "Duration of requests sent to DynamoDB (each attempt of a retried call), by operation.", Buckets: latencyBuckets},
			[]string{"operation"}),
		capacity: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bigseg_dynamodb_consumed_read_capacity_units_total",
			Help: "Read capacity units that DynamoDB's answers say bigseg's requests consumed, by operation."},
			[]string{"operation"}),
		unprocessed: counter("bigseg_dynamodb_unprocessed_keys_retried_total",
			"Keys that a BatchGetItem answer left unprocessed (throttling, an answer over 16 MB) and that a read asked for again."),
	}
	m.reg.MustRegister(d.requests, d.durations, d.capacity, d.unprocessed)
	return d
}

// Request counts one request to DynamoDB: its operation, its error's code ("" for a
// success) and how long it took.
func (d *DynamoDB) Request(operation, code string, took time.Duration) {
	operation = d.operation(operation)
	switch {
	case code == "":
		code = "ok"
	case !slices.Contains(d.codes, code):
		code = "other"
	}
	d.requests.WithLabelValues(operation, code).Inc()
	d.durations.WithLabelValues(operation).Observe(took.Seconds())
}

// ConsumedReadCapacity counts the read capacity units a request consumed.
func (d *DynamoDB) ConsumedReadCapacity(operation string, units float64) {
	if units > 0 {
		d.capacity.WithLabelValues(d.operation(operation)).Add(units)
	}
}

// UnprocessedRetried counts keys left unprocessed and asked for again.
func (d *DynamoDB) UnprocessedRetried(keys int) {
	if keys > 0 {
		d.unprocessed.Add(float64(keys))
	}
}

func (d *DynamoDB) operation(op string) string {
	if slices.Contains(d.operations, op) {
		return op
	}
	return "other"
}
