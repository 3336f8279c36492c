package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// ChildrenOnly is tp for the store clients' instrumentation (redisotel, storage/dynamodb's
// own): their spans are made only beneath a span being recorded (a lookup's read, a poll),
// never as roots of their own, which the sampler would sample apart from the lookups they
// serve (a read of lookups not sampled, the pool's own dials). Nil for nil.
func ChildrenOnly(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return nil
	}
	return childrenOnly{tp: tp}
}

type childrenOnly struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (c childrenOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{t: c.tp.Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	t trace.Tracer
}

// Start starts a span beneath the one of ctx if it is being recorded; else it returns ctx
// and that span (which records nothing) as they are.
func (c childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); !parent.IsRecording() {
		return ctx, parent
	}
	return c.t.Start(ctx, name, opts...)
}
