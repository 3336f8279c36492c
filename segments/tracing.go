package segments

import (
	"cmp"
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// WithTracerProvider makes spans of lookups beneath their callers' recording spans, of the
// store reads they begin, and of polls; nil, the default, makes none, and a lookup then runs
// no code of OpenTelemetry's. See the package documentation.
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

// tracedLookup is LookupHash (one hash) or LookupBatch in a span of its own, with the
// environment, the worst status, and whether the cache answered (a batch: how many hits).
func (e *Environment) tracedLookup(ctx context.Context, hashes []string, batch bool) []Answer {
	ctx, end := e.svc.span(ctx, "lookup", false)
	var answers []Answer
	if batch {
		answers = e.lookupBatch(ctx, hashes)
	} else {
		answers = []Answer{e.lookupHash(ctx, hashes[0])}
	}
	status, hits, err := Healthy, 0, error(nil)
	for _, a := range answers {
		if a.Status == StoreError || a.Status == Stale && status == Healthy {
			status = a.Status
		}
		if a.Cached {
			hits++
		}
		err = cmp.Or(err, a.Err)
	}
	attrs := []attribute.KeyValue{attribute.String("bigseg.environment", e.Name), attribute.String("bigseg.lookup.status", string(status))}
	switch {
	case batch:
		attrs = append(attrs, attribute.Int("bigseg.lookup.contexts", len(hashes)), attribute.Int("bigseg.cache.hits", hits))
	case hits == 1:
		attrs = append(attrs, attribute.String("bigseg.cache", "hit"))
	default:
		attrs = append(attrs, attribute.String("bigseg.cache", "miss"))
	}
	end(err, attrs...)
	return answers
}

// span starts a span beneath ctx's if that one is recorded (a root, for root), and returns
// what ends it, an error with err's text if err is set (store errors carry no credential:
// storage/redis redacts its URLs, and no other error quotes one). Without a tracer, or beneath
// a span not recorded, it starts none.
func (s *Service) span(ctx context.Context, name string, root bool) (context.Context, func(err error, attrs ...attribute.KeyValue)) {
	if s.tracer == nil || !root && !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, func(error, ...attribute.KeyValue) {}
	}
	var opts []trace.SpanStartOption
	if root {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := s.tracer.Start(ctx, name, opts...)
	return ctx, func(err error, attrs ...attribute.KeyValue) {
		span.SetAttributes(attrs...)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
