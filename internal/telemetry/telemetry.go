// Package telemetry sets up OpenTelemetry for bigseg from the standard OTEL_* variables, as
// LaunchDarkly's Relay Proxy does: traces exported by OTLP (or to the console), and, when
// asked, the metrics of bigseg's Prometheus registry exported by OTLP too (through the
// Prometheus bridge: one instrumentation, not two; /metrics stays as it is). bigseg adds no
// variable of its own. Nothing is exported, and no collector dialled, unless an exporter or an
// OTLP endpoint is set: with none, Setup returns a Telemetry whose providers are nil, and the
// packages that take them install nothing, so that a request pays nothing for OpenTelemetry.
//
// The SDK and the exporters honour most variables themselves; Setup checks every one first,
// since they log a bad value and go on without it, and refuses it with an error that names
// the variable (never a value: headers carry credentials). Setup reads its own choices (the
// exporters, protocols, sampler, batch settings) through getenv; the exporters read their
// connection settings from the process environment, which cmd/server's getenv is.
//
// Faults of the collector never reach a lookup: spans are exported by the SDK's batch span
// processor in the background, from a queue of OTEL_BSP_MAX_QUEUE_SIZE spans, and the spans
// that find it full are dropped and counted (bigseg_otel_spans_dropped_total); metrics are
// exported by a periodic reader. Export failures are logged once when they begin, at most
// once a minute while they last, and once when exports succeed again. Shutdown flushes what
// is queued within its context, then abandons the exports still running.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	prombridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
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
	// exported over OTLP (or to the console).
	MeterProvider metric.MeterProvider
	// Propagator reads W3C traceparent, tracestate and baggage; nil unless traces are exported.
	Propagator propagation.TextMapPropagator

	spansQueued *atomic.Int64 // spans waiting for export (see boundedProcessor)
	noRoots     bool          // the sampler samples no trace that bigseg begins
	shutdowns   []func(context.Context) error
	abort       context.CancelFunc // makes the exports still running give up
	waits       []<-chan struct{}  // closed once each exporter is shut down
}

// Options is what Setup needs besides the environment; its zero value is valid.
type Options struct {
	Log      *slog.Logger         // export failures; default: discarded
	Registry *prometheus.Registry // bridged into OTLP metrics, and counts dropped spans
	Version  string               // service.version
	Stdout   io.Writer            // where the console exporters write; default os.Stdout
}

// Setup reads the OTEL_* variables through getenv and sets up what they ask for; see the
// package documentation. Shutdown releases it.
func Setup(ctx context.Context, getenv func(string) string, o Options) (*Telemetry, error) {
	s, err := readSettings(getenv)
	if err != nil {
		return nil, err
	}
	t := &Telemetry{}
	if s.traces == exporterNone && s.metrics == exporterNone {
		return t, nil
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	h := &health{log: o.Log, now: time.Now}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(h.failed))
	otel.SetLogger(logr.FromSlogHandler(o.Log.Handler()))
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(o.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %w", err)
	}
	abortCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	t.abort = abort
	if s.traces != exporterNone {
		if err := t.traces(ctx, s, res, h, abortCtx, o); err != nil {
			return nil, errors.Join(err, t.Shutdown(ctx))
		}
	}
	if s.metrics != exporterNone {
		if err := t.metrics(ctx, s, res, h, abortCtx, o); err != nil {
			return nil, errors.Join(err, t.Shutdown(ctx))
		}
	}
	return t, nil
}

// traces sets up the tracer provider: the sampler, the batch span processor behind the
// bounded queue, and the exporter.
func (t *Telemetry) traces(ctx context.Context, s settings, res *resource.Resource, h *health, abort context.Context, o Options) error {
	var exp sdktrace.SpanExporter
	var err error
	switch {
	case s.traces == exporterConsole:
		exp, err = stdouttrace.New(stdouttrace.WithWriter(o.Stdout))
	case s.tracesProtocol == protocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return fmt.Errorf("OTEL_TRACES_EXPORTER: %w", err)
	}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "bigseg_otel_spans_dropped_total",
		Help: "Spans dropped unexported because the export queue (OTEL_BSP_MAX_QUEUE_SIZE) was full: the collector is slow or down."})
	failed := prometheus.NewCounter(prometheus.CounterOpts{Name: "bigseg_otel_spans_export_failed_total",
		Help: "Spans lost in exports that failed: the collector refused them, answered garbage, or did not answer in time."})
	if o.Registry != nil {
		for _, c := range []prometheus.Collector{dropped, failed} {
			if err := o.Registry.Register(c); err != nil {
				return err
			}
		}
	}
	queued := new(atomic.Int64)
	t.spansQueued = queued
	wrapped := &spanExporter{SpanExporter: exp, queued: queued, failed: failed, health: h, abort: abort, done: make(chan struct{})}
	bsp := sdktrace.NewBatchSpanProcessor(wrapped, sdktrace.WithMaxQueueSize(s.queueSize), sdktrace.WithMaxExportBatchSize(s.batch),
		sdktrace.WithBatchTimeout(s.batchDelay), sdktrace.WithExportTimeout(s.exportTimeout))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(s.sampler),
		sdktrace.WithSpanProcessor(&boundedProcessor{SpanProcessor: bsp, queued: queued, max: int64(s.queueSize), dropped: dropped}))
	t.TracerProvider, t.noRoots = tp, s.noRoots
	t.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	t.shutdowns = append(t.shutdowns, tp.Shutdown)
	t.waits = append(t.waits, wrapped.done)
	return nil
}

// metrics sets up the meter provider: a periodic reader of the Prometheus registry (bridged)
// and of the meters of the instrumentation (the HTTP server's request duration).
func (t *Telemetry) metrics(ctx context.Context, s settings, res *resource.Resource, h *health, abort context.Context, o Options) error {
	var exp sdkmetric.Exporter
	var err error
	switch {
	case s.metrics == exporterConsole:
		exp, err = stdoutmetric.New(stdoutmetric.WithWriter(o.Stdout))
	case s.metricsProtocol == protocolGRPC:
		exp, err = otlpmetricgrpc.New(ctx)
	default:
		exp, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return fmt.Errorf("OTEL_METRICS_EXPORTER: %w", err)
	}
	wrapped := &metricExporter{Exporter: exp, health: h, abort: abort, done: make(chan struct{})}
	opts := []sdkmetric.PeriodicReaderOption{sdkmetric.WithInterval(s.metricInterval), sdkmetric.WithTimeout(s.metricTimeout)}
	if o.Registry != nil {
		opts = append(opts, sdkmetric.WithProducer(prombridge.NewMetricProducer(prombridge.WithGatherer(o.Registry))))
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(sdkmetric.NewPeriodicReader(wrapped, opts...)))
	t.MeterProvider = mp
	t.shutdowns = append(t.shutdowns, mp.Shutdown)
	t.waits = append(t.waits, wrapped.done)
	return nil
}

// Shutdown exports what is queued, within ctx; when ctx ends first, the exports still running
// give up, and Shutdown returns once they have, with ctx's error. Nothing runs after it.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil || t.abort == nil {
		return nil
	}
	errs := make([]error, len(t.shutdowns))
	var wg sync.WaitGroup
	for i, shutdown := range t.shutdowns {
		wg.Go(func() { errs[i] = shutdown(ctx) })
	}
	wg.Wait()
	t.abort()
	for _, done := range t.waits {
		<-done
	}
	return errors.Join(errs...)
}
