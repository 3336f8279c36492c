// Package telemetry sets up OpenTelemetry for bigseg from the standard OTEL_* variables, read
// by OpenTelemetry's own packages (autoexport, autoprop, the SDK); otelhttp makes the HTTP
// server spans and http.server.request.duration; bigseg's Prometheus registry is bridged into
// the metrics exported (/metrics stays). Nothing is exported, and no collector dialled, unless
// an exporter or an OTLP endpoint is set: autoexport's default exporter, otlp, is replaced by
// none unless an endpoint says where to send (traces: the general endpoint or their own;
// metrics, which /metrics serves: their own). With nothing on, the providers are nil: a request
// pays nothing for OpenTelemetry. OTEL_SDK_DISABLED=true turns it all off.
//
// Faults of the collector never reach a lookup: the SDK exports in the background (a span that
// finds the queue full is dropped), each export bounded by OTEL_EXPORTER_OTLP_TIMEOUT. Spans of
// failed exports are counted; OpenTelemetry's errors are logged once a failure period.
package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	prombridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of bigseg's telemetry unless OTEL_SERVICE_NAME (or
// service.name in OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const ServiceName = "bigseg"

// Telemetry is what Setup made: the providers to give the packages that trace (nil when that
// signal is off) and the propagator of incoming requests' trace context and baggage.
type Telemetry struct {
	TracerProvider trace.TracerProvider          // makes the spans; nil unless traces are exported
	MeterProvider  metric.MeterProvider          // the HTTP metrics; nil unless metrics are exported
	Propagator     propagation.TextMapPropagator // OTEL_PROPAGATORS'; nil: W3C trace context and baggage

	noRoots   bool // the sampler samples no trace that bigseg would begin
	shutdowns []func(context.Context) error
}

// Options is what Setup needs besides the environment; its zero value is valid.
type Options struct {
	Log      *slog.Logger         // OpenTelemetry's errors; default: discarded
	Registry *prometheus.Registry // bridged into OTLP metrics, and counts failed exports
	Version  string               // service.version
}

// Setup sets up what the OTEL_* variables of the process environment ask for. A value the
// libraries refuse is an error; one they replace by a default is logged.
func Setup(ctx context.Context, o Options) (_ *Telemetry, err error) {
	t := &Telemetry{}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return t, nil
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.Shutdown(ctx))
		}
	}()
	o.Log, o.Registry = cmp.Or(o.Log, slog.New(slog.DiscardHandler)), cmp.Or(o.Registry, prometheus.NewRegistry())
	h := &health{log: o.Log, now: time.Now}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(h.failed))
	otel.SetLogger(logr.FromSlogHandler(o.Log.Handler()))
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(o.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	var spanOpts []autoexport.SpanOption
	if !set("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
		spanOpts = append(spanOpts, autoexport.WithFallbackSpanExporter(func(context.Context) (sdktrace.SpanExporter, error) { return nil, nil }))
	}
	exp, err := autoexport.NewSpanExporter(ctx, spanOpts...)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry traces exporter: %w", err)
	}
	if exp != nil && !autoexport.IsNoneSpanExporter(exp) {
		failed := prometheus.NewCounter(prometheus.CounterOpts{Name: "bigseg_otel_spans_export_failed_total",
			Help: "Spans lost in exports that failed: the collector refused them, answered garbage, or did not answer in time."})
		if err := o.Registry.Register(failed); err != nil {
			return nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
			sdktrace.WithBatcher(&spanExporter{SpanExporter: exp, failed: failed, health: h}))
		t.TracerProvider, t.Propagator = tp, autoprop.NewTextMapPropagator()
		// The SDK's sampler, asked with a trace ID any ratio above 0 samples: does it begin traces?
		_, probe := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(lowIDs{})).Tracer("").Start(ctx, "")
		t.noRoots = !probe.SpanContext().IsSampled()
		t.shutdowns = append(t.shutdowns, tp.Shutdown)
	}
	reader, err := metricReader(ctx, o.Registry)
	if err != nil {
		return nil, err
	}
	if reader != nil && !autoexport.IsNoneMetricReader(reader) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader))
		t.MeterProvider, t.shutdowns = mp, append(t.shutdowns, mp.Shutdown)
	}
	return t, nil
}

var producerMu sync.Mutex // autoexport keeps the metric producer in a package variable

// metricReader is autoexport's reader, exporting reg; none without an exporter or endpoint.
func metricReader(ctx context.Context, reg *prometheus.Registry) (sdkmetric.Reader, error) {
	var opts []autoexport.MetricOption
	if !set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
		opts = append(opts, autoexport.WithFallbackMetricReader(func(context.Context) (sdkmetric.Reader, error) { return nil, nil }))
	}
	producerMu.Lock() // two programs in one process (tests) set up one at a time
	defer producerMu.Unlock()
	autoexport.WithFallbackMetricProducer(func(context.Context) (sdkmetric.Producer, error) {
		return prombridge.NewMetricProducer(prombridge.WithGatherer(reg)), nil
	})
	reader, err := autoexport.NewMetricReader(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry metrics exporter: %w", err)
	}
	return reader, nil
}

// lowIDs are a probe span's IDs: the trace ID's lower half, which ratios test, zero.
type lowIDs struct{}

func (lowIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	return trace.TraceID{1}, trace.SpanID{1}
}
func (lowIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return trace.SpanID{1} }

// set says whether any of the variables is set, not empty.
func set(names ...string) bool {
	return slices.ContainsFunc(names, func(name string) bool { return strings.TrimSpace(os.Getenv(name)) != "" })
}

// Shutdown exports what is queued, within ctx (exports still running then end on their own).
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	for _, shutdown := range t.shutdowns {
		errs = append(errs, shutdown(ctx))
	}
	return errors.Join(errs...)
}
