package segments

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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

func linked(s sdktrace.ReadOnlySpan, to trace.SpanContext) bool {
	for _, l := range s.Links() {
		if l.SpanContext.Equal(to) {
			return true
		}
	}
	return false
}

// A traced lookup is a span beneath its caller's: environment, cache hit or miss, status; a
// miss's read is a span beneath it, linked to it, and it links to the read.
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
	if read.Parent().SpanID() != miss.SpanContext().SpanID() || !linked(read, miss.SpanContext()) || !linked(miss, read.SpanContext()) {
		t.Error("the read is not beneath and linked to its lookup, and back")
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

// A read shared by several lookups, coalesced (one context) or batched (several), is one
// span, linked to the lookup that asked for each context, and every lookup it serves links
// to it: every trace shows its read.
func TestSharedReadIsOneSpanLinkedToEveryLookup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, store, rec, caller := tracedService(t, WithCache(0, 0), WithReadsInFlight(1), WithLookupTimeout(0), WithPollInterval(time.Hour))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()
		store.block = make(chan struct{})
		var wg sync.WaitGroup
		lookup := func(key string) {
			wg.Go(func() {
				ctx, span := caller.Start(context.Background(), "request")
				defer span.End()
				if a := s.LookupHash(ctx, Hash(key)); a.Err != nil {
					t.Error(a.Err)
				}
			})
		}
		lookup("first") // takes the one reader, and blocks it
		synctest.Wait()
		for i := range 4 {
			lookup("same") // coalesced into one miss
			lookup("other-" + strconv.Itoa(i))
		}
		synctest.Wait()
		store.mu.Lock()
		close(store.block)
		store.block = nil
		store.mu.Unlock()
		wg.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		reads, lookups := byName(rec, "read"), byName(rec, "lookup")
		if len(reads) != 2 || len(lookups) != 9 {
			t.Fatalf("%d reads, %d lookups; want 2 (the first, then the other 8 lookups' at once), 9", len(reads), len(lookups))
		}
		shared := reads[0]
		if attr(shared, "bigseg.read.contexts") != "5" {
			shared = reads[1]
		}
		// The read links to the lookup that asked for each of its 5 contexts; the 3 that
		// joined the read of "same" already asked for link to it from their side.
		if attr(shared, "bigseg.read.contexts") != "5" || len(shared.Links()) != 5 {
			t.Errorf("the shared read: %s contexts, %d links; want 5, 5", attr(shared, "bigseg.read.contexts"), len(shared.Links()))
		}
		servedByShared, linkedBack := 0, 0
		for _, l := range lookups {
			if linked(l, shared.SpanContext()) {
				servedByShared++
				if linked(shared, l.SpanContext()) {
					linkedBack++
				}
			} else if linked(shared, l.SpanContext()) {
				t.Errorf("the shared read links to lookup %v, which does not link to it", l.SpanContext().SpanID())
			}
		}
		if servedByShared != 8 || linkedBack != 5 {
			t.Errorf("%d lookups link to the shared read (want 8), %d of them linked from it (want 5)", servedByShared, linkedBack)
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
