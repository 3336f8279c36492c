package dynamodb_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/fixture"
)

// traced is a client of endpoint made as main makes it, with a TracerProvider whose spans the
// recorder keeps; closed when the test ends.
func traced(t *testing.T, endpoint string) (*dynamodb.Client, *tracetest.SpanRecorder) {
	t.Helper()
	dynamotest.Env(t, endpoint)
	spans := tracetest.NewSpanRecorder()
	c, err := dynamodb.NewClient(context.Background(), dynamodb.ClientOptions{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, spans
}

// attributes are a span's attributes as text.
func attributes(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, a := range s.Attributes() {
		m[string(a.Key)] = a.Value.Emit()
	}
	return m
}

// A call is one client span, its attempts within it: named and described as the AWS SDKs
// describe theirs (the conventions' rpc.system.name aws-api, rpc.method DynamoDB/...), with
// its table and region, and an error's code when it fails.
func TestTracingSpans(t *testing.T) {
	_, table := moto(t)
	tests := []struct {
		name      string
		rule      dynamotest.Rule
		timeout   time.Duration
		attempts  int
		status    codes.Code
		requestID bool // the last answer's request ID recorded
		attrs     map[string]string
	}{
		{"a read", nil, 10 * time.Second, 1, codes.Unset, true, map[string]string{"http.response.status_code": "200"}},
		{"throttled", func(int, func() dynamotest.Reply) dynamotest.Reply {
			return dynamotest.Error(http.StatusBadRequest, "ThrottlingException", "slow down")
		}, 10 * time.Second, dynamodb.DefaultMaxAttempts, codes.Error, true, map[string]string{"http.response.status_code": "400", "error.type": "ThrottlingException"}},
		{"a 503 then an answer", func(n int, forward func() dynamotest.Reply) dynamotest.Reply {
			if n == 1 {
				return dynamotest.Reply{Status: http.StatusServiceUnavailable}
			}
			return forward()
		}, 10 * time.Second, 2, codes.Unset, true, map[string]string{"http.response.status_code": "200"}},
		{"a hang", func(int, func() dynamotest.Reply) dynamotest.Reply {
			return dynamotest.Reply{Hang: true}
		}, 200 * time.Millisecond, 1, codes.Error, false, map[string]string{"error.type": "deadline_exceeded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
			proxy.On("BatchGetItem", tt.rule)
			c, spans := traced(t, proxy.URL)
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			_ = dynamodb.New(c, table, "").Memberships(ctx, []string{segments.Hash("alice")})
			if proxy.Calls("BatchGetItem") != tt.attempts {
				t.Errorf("%d attempts, want %d", proxy.Calls("BatchGetItem"), tt.attempts)
			}
			if len(spans.Ended()) != 1 {
				t.Fatalf("%d spans, want one for the call", len(spans.Ended()))
			}
			s := spans.Ended()[0]
			if s.Name() != "DynamoDB.BatchGetItem" || s.SpanKind() != trace.SpanKindClient || s.Status().Code != tt.status {
				t.Errorf("span %q, kind %v, status %v; want DynamoDB.BatchGetItem, client, %v", s.Name(), s.SpanKind(), s.Status(), tt.status)
			}
			got := attributes(s)
			if id, ok := got["aws.request_id"]; ok != tt.requestID || ok && id == "" {
				t.Errorf("aws.request_id %q (%v), want one: %v", id, ok, tt.requestID)
			}
			delete(got, "aws.request_id")
			want := map[string]string{
				"rpc.system.name":          "aws-api",
				"rpc.method":               "DynamoDB/BatchGetItem",
				"db.system.name":           "aws.dynamodb",
				"aws.region":               dynamotest.Region,
				"aws.dynamodb.table_names": `["` + table + `"]`,
			}
			for k, v := range tt.attrs {
				want[k] = v
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
		})
	}
}

// Every operation the package calls (a load's writes and deletions too) names its table.
func TestTracingNamesTheTableOfEveryOperation(t *testing.T) {
	_, table := moto(t)
	c, spans := traced(t, dynamotest.Shared(t).URL)
	store := dynamodb.New(c, table, "")
	ctx := context.Background()
	for _, contexts := range [][]fixture.Context{
		{ctxOf("alice", []string{"a.g1"}, nil), ctxOf("bob", []string{"a.g1"}, nil)},
		{ctxOf("alice", []string{"a.g1"}, nil)}, // bob deleted
	} {
		if _, err := store.Load(ctx, contexts, fixture.LoadOptions{Replace: true}); err != nil {
			t.Fatal(err)
		}
	}
	var ops []string
	for _, s := range spans.Ended() {
		op := strings.TrimPrefix(s.Name(), "DynamoDB.")
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
		if got := attributes(s)["aws.dynamodb.table_names"]; got != `["`+table+`"]` {
			t.Errorf("span %q: aws.dynamodb.table_names %s, want [%s]", s.Name(), got, table)
		}
	}
	slices.Sort(ops)
	if diff := cmp.Diff(dynamodb.Operations(), ops); diff != "" {
		t.Errorf("operations traced (-want +got):\n%s", diff)
	}
}

// No span, of a call that succeeds or fails, holds a key, a hash or a credential.
func TestTracingShowsNoKeyNorCredential(t *testing.T) {
	_, table := moto(t)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	proxy.On("BatchGetItem", func(n int, forward func() dynamotest.Reply) dynamotest.Reply {
		if n == 3 {
			return dynamotest.Error(http.StatusBadRequest, "ValidationException", "invalid")
		}
		return forward()
	})
	dynamotest.Env(t, proxy.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDs3cretid")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cret-access-key")
	t.Setenv("AWS_SESSION_TOKEN", "s3cret-session-token")
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
	if r := store.Memberships(context.Background(), []string{hash})[0]; r.Err == nil {
		t.Fatal("the third call, refused: no error")
	}
	if len(spans.Ended()) != 3 || spans.Ended()[2].Status().Code != codes.Error {
		t.Fatalf("%d spans, want a span a call, the last failed", len(spans.Ended()))
	}
	for _, s := range spans.Ended() {
		texts := []string{s.Name(), s.Status().Description}
		for k, v := range attributes(s) {
			texts = append(texts, k+"="+v)
		}
		for _, text := range texts {
			for _, secret := range []string{"s3cret-access-key", "AKIDs3cretid", "s3cret-session-token", hash, "secret-key"} {
				if strings.Contains(text, secret) {
					t.Errorf("span %q holds %q: %s", s.Name(), secret, text)
				}
			}
		}
	}
}
