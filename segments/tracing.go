package segments

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// WithTracerProvider makes spans of lookups beneath their callers' recording spans, of the
// store reads that serve them, and of polls; nil, the default, makes none, and a lookup then
// runs no code of OpenTelemetry's. See the package documentation.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *Service) {
		if tp != nil {
			s.tracer = tp.Tracer("github.com/bigseg/bigseg/segments")
		}
	}
}

// traced says whether a lookup in ctx is traced: its caller's span is being recorded.
func (e *Environment) traced(ctx context.Context) bool {
	return e.svc.tracer != nil && trace.SpanFromContext(ctx).IsRecording()
}

// tracedLookup is LookupHash in a span of its own.
func (e *Environment) tracedLookup(ctx context.Context, hash string) Answer {
	ctx, span := e.svc.tracer.Start(ctx, "lookup")
	a := e.lookupHash(ctx, hash)
	cache := "miss"
	if a.Cached {
		cache = "hit"
	}
	span.SetAttributes(attribute.String("bigseg.environment", e.Name), attribute.String("bigseg.cache", cache),
		attribute.String("bigseg.lookup.status", string(a.Status)))
	endWith(span, a.Err)
	return a
}

// tracedBatch is LookupBatch in a span of its own, with its worst status; its read is a
// child of it.
func (e *Environment) tracedBatch(ctx context.Context, hashes []string) []Answer {
	ctx, span := e.svc.tracer.Start(ctx, "lookup")
	answers := e.lookupBatch(ctx, hashes)
	status, hits := Healthy, 0
	for _, a := range answers {
		if a.Status == StoreError || a.Status == Stale && status == Healthy {
			status = a.Status
		}
		if a.Cached {
			hits++
		}
	}
	span.SetAttributes(attribute.String("bigseg.environment", e.Name), attribute.Int("bigseg.lookup.contexts", len(hashes)),
		attribute.Int("bigseg.cache.hits", hits), attribute.String("bigseg.lookup.status", string(status)))
	if status == StoreError {
		span.SetStatus(codes.Error, "contexts not read")
	}
	span.End()
	return answers
}

// startRead starts the span of a read of n contexts, beneath the lookup (or batch) that
// began it, if that one is traced; endRead ends it.
func (e *Environment) startRead(ctx context.Context, n int) (context.Context, trace.Span) {
	if e.svc.tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return e.svc.tracer.Start(ctx, "read", trace.WithAttributes(attribute.String("bigseg.environment", e.Name), attribute.Int("bigseg.read.contexts", n)))
}

// endRead ends a read's span, an error if a context could not be read.
func endRead(span trace.Span, read []Read) {
	if span == nil {
		return
	}
	failed := 0
	for _, r := range read {
		if r.Err != nil {
			failed++
			span.SetStatus(codes.Error, r.Err.Error())
		}
	}
	span.SetAttributes(attribute.Int("bigseg.read.failed", failed))
	span.End()
}

// startPoll starts a poll's span: a root, never part of a lookup's trace; nil when untraced.
func (s *Service) startPoll(ctx context.Context) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, nil
	}
	return s.tracer.Start(ctx, "poll", trace.WithNewRoot(), trace.WithAttributes(attribute.Int("bigseg.environments", len(s.envs))))
}

func endPoll(span trace.Span, reads []MetadataRead) {
	if span == nil {
		return
	}
	for _, r := range reads {
		if r.Err != nil {
			span.SetStatus(codes.Error, r.Err.Error())
		}
	}
	span.End()
}

// endWith ends span, an error with err's text if err is set (store errors carry no
// credential: storage/redis redacts its URLs, and no other error quotes one).
func endWith(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
