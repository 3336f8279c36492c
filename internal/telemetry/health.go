package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// spanExporter counts the spans of failed exports and tells health of each success.
type spanExporter struct {
	sdktrace.SpanExporter
	failed prometheus.Counter
	health *health
}

func (e *spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		e.failed.Add(float64(len(spans)))
		return err
	}
	e.health.ok()
	return nil
}

const failureLogInterval = time.Minute // the longest a failure goes unlogged while they go on

// health logs OpenTelemetry's errors (failed exports above all): the first of a failure period,
// then at most one a failureLogInterval with their count, and the recovery of span exports.
type health struct {
	log     *slog.Logger
	now     func() time.Time
	failing atomic.Bool // read without the lock by ok, at every export
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
		h.log.Warn("OpenTelemetry failed: telemetry is dropped until it succeeds again; lookups are not affected", "err", err.Error())
	case now.Sub(h.logged) >= failureLogInterval:
		h.log.Warn("OpenTelemetry still failing", "err", err.Error(), "failuresSinceLastLog", h.unsaid+1,
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
	if h.failing.CompareAndSwap(true, false) {
		h.log.Info("OpenTelemetry export succeeded again", "failuresSinceLastLog", h.unsaid,
			"failedFor", h.now().Sub(h.since).Round(time.Second).String())
	}
}
