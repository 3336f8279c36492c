package otlptest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// The events of a Record.
const (
	EventListening  = "listening"  // the receiver's addresses, its first record
	EventConnection = "connection" // a connection accepted by a listener
	EventExport     = "export"     // an export request, decoded
)

// The signals of an export.
const (
	Traces  = "traces"
	Metrics = "metrics"
)

// Record is one thing a receiver saw, and one line of its output (JSON). A process's output is
// all a test gets of it, so a Record holds all there is to know: the request's payload, as
// protojson, and its headers.
type Record struct {
	Event    string              `json:"event"`
	Listener string              `json:"listener,omitempty"` // "grpc" or "http"
	GRPC     string              `json:"grpc,omitempty"`     // with EventListening: the addresses
	HTTP     string              `json:"http,omitempty"`
	Signal   string              `json:"signal,omitempty"`   // with EventExport: Traces or Metrics
	Encoding string              `json:"encoding,omitempty"` // the body's Content-Encoding over HTTP ("gzip")
	Fault    string              `json:"fault,omitempty"`    // how it was answered, if not normally
	Headers  map[string][]string `json:"headers,omitempty"`  // HTTP headers or gRPC metadata, names lower-case
	Request  json.RawMessage     `json:"request,omitempty"`  // the Export*ServiceRequest, protojson
}

// Span is a received span with the resource and scope it came under.
type Span struct {
	*tracepb.Span
	Resource *resourcepb.Resource
	Scope    *commonpb.InstrumentationScope
}

// Metric is a received metric with the resource it came under.
type Metric struct {
	*metricspb.Metric
	Resource *resourcepb.Resource
}

// Received is everything a receiver has received, decoded; safe for concurrent use. Its Wait
// lets a test wait for a condition over it without sleeping.
type Received struct {
	mu      sync.Mutex
	records []Record
	spans   []*tracepb.ResourceSpans
	metrics []*metricspb.ResourceMetrics
	changed chan struct{} // closed and replaced at every record
}

func newReceived() *Received { return &Received{changed: make(chan struct{})} }

// add decodes rec's request and keeps both.
func (r *Received) add(rec Record) error {
	var spans []*tracepb.ResourceSpans
	var metrics []*metricspb.ResourceMetrics
	if rec.Event == EventExport {
		switch rec.Signal {
		case Traces:
			var req coltracepb.ExportTraceServiceRequest
			if err := protojson.Unmarshal(rec.Request, &req); err != nil {
				return fmt.Errorf("decode traces: %w", err)
			}
			spans = req.ResourceSpans
		case Metrics:
			var req colmetricspb.ExportMetricsServiceRequest
			if err := protojson.Unmarshal(rec.Request, &req); err != nil {
				return fmt.Errorf("decode metrics: %w", err)
			}
			metrics = req.ResourceMetrics
		default:
			return fmt.Errorf("unknown signal %q", rec.Signal)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	r.spans = append(r.spans, spans...)
	r.metrics = append(r.metrics, metrics...)
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// Records returns every record so far, in the order received.
func (r *Received) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// Exports returns the export records of signal ("" for both).
func (r *Received) Exports(signal string) []Record {
	var out []Record
	for _, rec := range r.Records() {
		if rec.Event == EventExport && (signal == "" || rec.Signal == signal) {
			out = append(out, rec)
		}
	}
	return out
}

// Connections returns how many connections listener ("grpc", "http", or "" for both) accepted.
func (r *Received) Connections(listener string) int {
	n := 0
	for _, rec := range r.Records() {
		if rec.Event == EventConnection && (listener == "" || rec.Listener == listener) {
			n++
		}
	}
	return n
}

// ResourceSpans returns every resource's spans received, as sent.
func (r *Received) ResourceSpans() []*tracepb.ResourceSpans {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.ResourceSpans(nil), r.spans...)
}

// ResourceMetrics returns every resource's metrics received, as sent.
func (r *Received) ResourceMetrics() []*metricspb.ResourceMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*metricspb.ResourceMetrics(nil), r.metrics...)
}

// Spans returns every span received, each with its resource and scope.
func (r *Received) Spans() []Span {
	var out []Span
	for _, rs := range r.ResourceSpans() {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out = append(out, Span{Span: s, Resource: rs.Resource, Scope: ss.Scope})
			}
		}
	}
	return out
}

// Metrics returns every metric received (one per export that carried it), each with its
// resource.
func (r *Received) Metrics() []Metric {
	var out []Metric
	for _, rm := range r.ResourceMetrics() {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				out = append(out, Metric{Metric: m, Resource: rm.Resource})
			}
		}
	}
	return out
}

// Payloads returns every export's payload as received (protojson, one a line): what a
// collector would store, for checks that something never appears in it. Headers are not in
// it: they are how the exporter authenticates, not telemetry.
func (r *Received) Payloads() string {
	var b strings.Builder
	for _, rec := range r.Exports("") {
		b.Write(rec.Request)
		b.WriteByte('\n')
	}
	return b.String()
}

// Wait returns once cond holds, checking it at every record and every 50 ms (for conditions
// on other things too), or ctx's error once ctx ends.
func (r *Received) Wait(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
