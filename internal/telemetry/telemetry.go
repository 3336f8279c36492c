// Package telemetry sets up OpenTelemetry for bigseg from the standard OTEL_* variables, as
// LaunchDarkly's Relay Proxy does, with OpenTelemetry's own packages doing the reading:
// autoexport the exporters, autoprop the propagators, the SDK the sampler, the batch span
// processor, the periodic reader and the resource; otelhttp makes the HTTP server spans and
// http.server.request.duration. bigseg parses none of these variables and adds none. Metrics
// exported are those of bigseg's Prometheus registry (bridged; /metrics stays) and otelhttp's.
//
// Nothing is exported, and no collector dialled, unless an exporter or an OTLP endpoint is
// set: autoexport's default exporter is otlp whatever is set, so bigseg gives it a fallback of
// none unless an endpoint says where to send. Traces follow the general endpoint or their
// own; metrics, which /metrics already serves, only their own or OTEL_METRICS_EXPORTER. With
// nothing on, the providers are nil, and the packages that take them install nothing, so
// that a request pays nothing for OpenTelemetry. OTEL_SDK_DISABLED=true turns everything off,
// as the specification says (the Go SDK does not read it).
//
// Faults of the collector never reach a lookup: spans are exported by the SDK's batch span
// processor in the background (a span that finds its queue full is dropped), metrics by a
// periodic reader, each export bounded by OTEL_EXPORTER_OTLP_TIMEOUT. The spans of failed
// exports are counted (bigseg_otel_spans_export_failed_total); OpenTelemetry's errors are
// logged once when they begin, at most once a minute while they last, and once when span
// exports succeed again.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
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
	// TracerProvider makes the spans; nil unless traces are exported.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics of the HTTP instrumentation; nil unless metrics are
	// exported.
	MeterProvider metric.MeterProvider
	// Propagator reads the callers' trace context (OTEL_PROPAGATORS; by default W3C
	// traceparent, tracestate and baggage); nil for that default.
	Propagator propagation.TextMapPropagator

	shutdowns []func(context.Context) error
}

// Options is what Setup needs besides the environment; its zero value is valid.
type Options struct {
	Log      *slog.Logger         // OpenTelemetry's errors; default: discarded
	Registry *prometheus.Registry // bridged into OTLP metrics, and counts failed exports
	Version  string               // service.version
}

// Setup reads the OTEL_* variables of the process environment (the SDK's packages read it
// themselves) and sets up what they ask for; see the package documentation. A value the
// libraries refuse (an unknown exporter or protocol, a bad resource attribute) is an error;
// one they log and replace by a default (a bad sampler or batch setting) is logged.
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
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
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
		if o.Registry != nil {
			if err := o.Registry.Register(failed); err != nil {
				return nil, err
			}
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
			sdktrace.WithBatcher(&spanExporter{SpanExporter: exp, failed: failed, health: h}))
		t.TracerProvider, t.Propagator = tp, autoprop.NewTextMapPropagator()
		t.shutdowns = append(t.shutdowns, tp.Shutdown)
	}
	var metricOpts []autoexport.MetricOption
	if !set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
		metricOpts = append(metricOpts, autoexport.WithFallbackMetricReader(func(context.Context) (sdkmetric.Reader, error) { return nil, nil }))
	}
	if o.Registry != nil {
		autoexport.WithFallbackMetricProducer(func(context.Context) (sdkmetric.Producer, error) {
			return prombridge.NewMetricProducer(prombridge.WithGatherer(o.Registry)), nil
		})
	}
	reader, err := autoexport.NewMetricReader(ctx, metricOpts...)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry metrics exporter: %w", err)
	}
	if reader != nil && !autoexport.IsNoneMetricReader(reader) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader))
		t.MeterProvider = mp
		t.shutdowns = append(t.shutdowns, mp.Shutdown)
	}
	return t, nil
}

// set says whether any of the variables is set, not empty.
func set(names ...string) bool {
	return slices.ContainsFunc(names, func(name string) bool { return strings.TrimSpace(os.Getenv(name)) != "" })
}

// Shutdown exports what is queued, within ctx, and stops the providers. When ctx ends
// first, it returns ctx's error; the exports still running end within their own timeout.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	for _, shutdown := range t.shutdowns {
		errs = append(errs, shutdown(ctx))
	}
	t.shutdowns = nil
	return errors.Join(errs...)
}
