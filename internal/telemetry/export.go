package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// boundedProcessor is the batch span processor behind a bound of its own that it can count:
// at most max spans handed to it and not yet handed to the exporter. The batch span processor
// never blocks, but drops the spans that find its queue full without saying how many; since
// this bound is never more than its queue, it drops none, and every span dropped is dropped
// here and counted.
type boundedProcessor struct {
	sdktrace.SpanProcessor
	queued  *atomic.Int64 // spans handed on and not yet exported; spanExporter gives them back
	max     int64
	dropped prometheus.Counter
}

func (p *boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() { // the batch span processor ignores these too
		return
	}
	if p.queued.Add(1) > p.max {
		p.queued.Add(-1)
		p.dropped.Inc()
		return
	}
	p.SpanProcessor.OnEnd(s)
}

// spanExporter is the exporter as the batch span processor sees it: it gives the queue back
// its room for the spans it is handed, counts the spans of a failed export, tells health of
// each success (failures come through otel's error handler), and gives up once Shutdown's
// time is up.
type spanExporter struct {
	sdktrace.SpanExporter
	queued *atomic.Int64
	failed prometheus.Counter // spans of the exports that failed
	health *health
	abort  context.Context
	done   chan struct{}
	once   sync.Once
}

func (e *spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.queued.Add(-int64(len(spans)))
	if err := e.abort.Err(); err != nil { // Shutdown's time is up: the rest is lost, not sent
		e.failed.Add(float64(len(spans)))
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer context.AfterFunc(e.abort, cancel)()
	defer cancel()
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		e.health.ok()
	} else {
		e.failed.Add(float64(len(spans)))
	}
	return err
}

func (e *spanExporter) Shutdown(ctx context.Context) error {
	defer e.once.Do(func() { close(e.done) })
	return e.SpanExporter.Shutdown(ctx)
}

// metricExporter is spanExporter's counterpart for the periodic reader.
type metricExporter struct {
	sdkmetric.Exporter
	health *health
	abort  context.Context
	done   chan struct{}
	once   sync.Once
}

func (e *metricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	ctx, cancel := context.WithCancel(ctx)
	defer context.AfterFunc(e.abort, cancel)()
	defer cancel()
	err := e.Exporter.Export(ctx, rm)
	if err == nil {
		e.health.ok()
	}
	return err
}

func (e *metricExporter) Shutdown(ctx context.Context) error {
	defer e.once.Do(func() { close(e.done) })
	return e.Exporter.Shutdown(ctx)
}

// failureLogInterval is the longest a failure goes unlogged while exports keep failing.
const failureLogInterval = time.Minute

// health logs export failures once a failure period: its first failure, then at most once
// a failureLogInterval while they last, with how many there were, and once exports succeed
// again. Every error of OpenTelemetry's comes through failed (otel.SetErrorHandler).
type health struct {
	log     *slog.Logger
	now     func() time.Time // the clock of the periods, time.Now from Setup
	failing atomic.Bool      // read without the lock by ok, at every export
	mu      sync.Mutex
	since   time.Time // the first failure of this period
	logged  time.Time // the last line logged
	unsaid  int       // failures since
}

func (h *health) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	switch {
	case !h.failing.Load():
		h.failing.Store(true)
		h.since, h.logged, h.unsaid = now, now, 0
		h.log.Warn("OpenTelemetry export failed: telemetry is dropped until it succeeds again; lookups are not affected", "err", err.Error())
	case now.Sub(h.logged) >= failureLogInterval:
		h.log.Warn("OpenTelemetry export still failing", "err", err.Error(), "failuresSinceLastLog", h.unsaid+1,
			"failingFor", now.Sub(h.since).Round(time.Second).String())
		h.logged, h.unsaid = now, 0
	default:
		h.unsaid++
	}
}

func (h *health) ok() {
	if !h.failing.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing.Load() {
		h.failing.Store(false)
		h.log.Info("OpenTelemetry export succeeded again", "failuresSinceLastLog", h.unsaid,
			"failedFor", h.now().Sub(h.since).Round(time.Second).String())
	}
}
