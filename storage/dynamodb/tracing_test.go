package dynamodb_test

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
)

// With a TracerProvider, every call is a client span (otelaws): its operation and table,
// never a key, a hash or a credential.
func TestTracingShowsNoKeyNorCredential(t *testing.T) {
	srv := dynamotest.Shared(t)
	dynamotest.Env(t, srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDs3cretid")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cret-access-key")
	table := dynamotest.Table(t, dynamotest.Client(t, srv.URL))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	c, err := dynamodb.NewClient(context.Background(), dynamodb.ClientOptions{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	store := dynamodb.NewStores(c, table, []string{"prefix"})[0]
	hash := segments.Hash("secret-key")
	for _, r := range store.Memberships(context.Background(), []string{hash}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if _, err := store.Metadata(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(spans.Ended()) < 2 {
		t.Fatalf("%d spans, want a span a call", len(spans.Ended()))
	}
	for _, s := range spans.Ended() {
		texts := []string{s.Name(), s.Status().Description}
		for _, a := range s.Attributes() {
			texts = append(texts, string(a.Key)+"="+a.Value.Emit())
		}
		for _, text := range texts {
			for _, secret := range []string{"s3cret-access-key", "AKIDs3cretid", hash, "secret-key"} {
				if strings.Contains(text, secret) {
					t.Errorf("span %q holds %q: %s", s.Name(), secret, text)
				}
			}
		}
	}
}
