package redis_test

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/redis"
)

// With a TracerProvider, every command and pipeline is a client span (redisotel), named by
// the commands alone: no key, no hash, and never AUTH's password, in any name or attribute.
func TestTracingShowsNoKeyNorPassword(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "pa55-secret")
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	c, err := redis.NewClient(redis.ClientOptions{URL: "redis://:pa55-secret@" + srv.Addr(), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	store := redis.New(c, "launchdarkly")
	ctx, parent := tp.Tracer("test").Start(context.Background(), "read")
	hash := segments.Hash("secret-key")
	for _, r := range store.Memberships(ctx, []string{hash}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if _, err := store.Metadata(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if len(spans.Ended()) < 3 {
		t.Fatalf("%d spans, want the read, its commands and the connection's", len(spans.Ended()))
	}
	for _, s := range spans.Ended() {
		texts := []string{s.Name(), s.Status().Description}
		for _, a := range s.Attributes() {
			texts = append(texts, string(a.Key)+"="+a.Value.Emit())
		}
		for _, e := range s.Events() {
			for _, a := range e.Attributes {
				texts = append(texts, a.Value.Emit())
			}
		}
		for _, text := range texts {
			for _, secret := range []string{"pa55-secret", hash, "big_segment", "launchdarkly:"} {
				if strings.Contains(text, secret) {
					t.Errorf("span %q holds %q: %s", s.Name(), secret, text)
				}
			}
		}
	}
}
