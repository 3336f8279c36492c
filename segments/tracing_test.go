package segments

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracedService is a service traced into a span recorder, and a tracer for the callers' spans.
func tracedService(t *testing.T, opts ...Option) (one, *fakeStore, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s, store, _ := newTestService(t, append([]Option{WithTracerProvider(tp)}, opts...)...)
	return s, store, rec, tp.Tracer("caller")
}

func byName(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

// A traced lookup is a span beneath its caller's: environment, cache hit or miss, status; a
// miss's read is a span beneath it.
func TestLookupSpans(t *testing.T) {
	s, store, rec, caller := tracedService(t)
	store.put("alice", []string{"beta.g1"}, nil)
	s.Poll(context.Background())
	for range 2 {
		ctx, parent := caller.Start(context.Background(), "GET /memberships/{contextKey}")
		s.LookupHash(ctx, Hash("alice"))
		parent.End()
	}
	lookups, reads := byName(rec, "lookup"), byName(rec, "read")
	if len(lookups) != 2 || len(reads) != 1 {
		t.Fatalf("%d lookups, %d reads; want 2, 1", len(lookups), len(reads))
	}
	miss, hit, read := lookups[0], lookups[1], reads[0]
	for _, tc := range []struct {
		span  sdktrace.ReadOnlySpan
		cache string
	}{{miss, "miss"}, {hit, "hit"}} {
		if attr(tc.span, "bigseg.cache") != tc.cache || attr(tc.span, "bigseg.environment") != "default" || attr(tc.span, "bigseg.lookup.status") != "HEALTHY" {
			t.Errorf("lookup attributes %v", tc.span.Attributes())
		}
	}
	if read.Parent().SpanID() != miss.SpanContext().SpanID() {
		t.Error("the read is not beneath its lookup")
	}
	if attr(read, "bigseg.read.contexts") != "1" {
		t.Errorf("read attributes %v", read.Attributes())
	}
	for _, p := range byName(rec, "poll") {
		if p.Parent().IsValid() {
			t.Error("a poll in a lookup's trace")
		}
	}
}

// Callers not traced (no span, or one not sampled) make no span at all.
func TestUntracedCallersMakeNoSpans(t *testing.T) {
	s, store, rec, _ := tracedService(t)
	store.put("alice", nil, nil)
	s.Poll(context.Background())
	notSampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1}, SpanID: [8]byte{1}}))
	for _, ctx := range []context.Context{context.Background(), notSampled} {
		s.LookupHash(ctx, Hash("alice"))
		s.LookupBatch(ctx, []string{Hash("bob")})
	}
	if n := len(rec.Ended()) - len(byName(rec, "poll")); n != 0 {
		t.Errorf("%d spans besides the polls", n)
	}
}

// A read shared by several lookups of one context is one span, in the trace of the lookup that
// began it, and no other lookup's: no links join traces.
func TestSharedReadIsInTheTraceThatBeganIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, store, rec, caller := tracedService(t, WithCache(0, 0), WithLookupTimeout(0))
		s.Poll(context.Background())
		store.block = make(chan struct{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				ctx, span := caller.Start(context.Background(), "request")
				defer span.End()
				if a := s.LookupHash(ctx, Hash("same")); a.Err != nil {
					t.Error(a.Err)
				}
			})
			synctest.Wait() // the first begins the read, the others join it
		}
		store.mu.Lock()
		close(store.block)
		store.block = nil
		store.mu.Unlock()
		wg.Wait()
		reads, lookups := byName(rec, "read"), byName(rec, "lookup")
		if len(reads) != 1 || len(lookups) != 3 {
			t.Fatalf("%d reads, %d lookups; want 1, 3", len(reads), len(lookups))
		}
		beneath := 0
		for _, l := range lookups {
			if reads[0].Parent().SpanID() == l.SpanContext().SpanID() {
				beneath++
			}
			if len(l.Links()) != 0 {
				t.Errorf("a lookup with links: %v", l.Links())
			}
		}
		if beneath != 1 || len(reads[0].Links()) != 0 {
			t.Errorf("the read is beneath %d lookups (want 1) and has %d links (want none)", beneath, len(reads[0].Links()))
		}
	})
}

// A batch lookup is one span, its read beneath it; a failed context makes both errors.
func TestBatchSpans(t *testing.T) {
	s, store, rec, caller := tracedService(t)
	store.put("alice", nil, nil)
	store.failRead("bob", errBoom)
	s.Poll(context.Background())
	ctx, parent := caller.Start(context.Background(), "POST /memberships")
	s.LookupBatch(ctx, []string{Hash("alice"), Hash("bob")})
	parent.End()
	lookups, reads := byName(rec, "lookup"), byName(rec, "read")
	if len(lookups) != 1 || len(reads) != 1 {
		t.Fatalf("%d lookups, %d reads", len(lookups), len(reads))
	}
	if reads[0].Parent().SpanID() != lookups[0].SpanContext().SpanID() {
		t.Error("the batch's read is not beneath it")
	}
	if attr(lookups[0], "bigseg.lookup.contexts") != "2" || attr(lookups[0], "bigseg.lookup.status") != "STORE_ERROR" ||
		lookups[0].Status().Code.String() != "Error" || attr(reads[0], "bigseg.read.failed") != "1" {
		t.Errorf("batch %v %v, read %v", lookups[0].Attributes(), lookups[0].Status(), reads[0].Attributes())
	}
}

// Polls are spans of their own, roots, even when a lookup's first poll runs inline.
func TestPollSpansAreRoots(t *testing.T) {
	s, _, rec, caller := tracedService(t)
	ctx, parent := caller.Start(context.Background(), "request")
	s.LookupHash(ctx, Hash("alice")) // polls inline: no poll yet
	parent.End()
	polls := byName(rec, "poll")
	if len(polls) != 1 {
		t.Fatalf("%d polls", len(polls))
	}
	if polls[0].Parent().IsValid() || polls[0].SpanContext().TraceID() == parent.SpanContext().TraceID() {
		t.Error("the poll is part of the lookup's trace")
	}
}
