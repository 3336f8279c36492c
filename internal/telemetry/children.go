package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// ChildrenOnly is tp for the store clients' spans (redisotel, storage/dynamodb's): made only
// beneath a request's or command's span being recorded, never as roots (a poll, a pool's dial).
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

// Start starts a span beneath ctx's if that one is recorded; else it returns ctx and its span.
func (c childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); !parent.IsRecording() {
		return ctx, parent
	}
	return c.t.Start(ctx, name, opts...)
}
