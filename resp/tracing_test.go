package resp_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/resp"
	"github.com/bigseg/bigseg/segments"
)

// A server span for every command, named by the command (OTHER for one not known), with no
// argument ever: not AUTH's token, not a key; an error answer is an error status.
func TestCommandSpans(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tokens, _ := auth.NewTokens([]string{"s3cret-token"}, "", slog.New(slog.DiscardHandler), nil)
	addr := serve(t, service(t, contexts), resp.Config{Tokens: tokens, TracerProvider: tp})
	hash := segments.Hash("alice")
	exchange := inline(t, addr)
	for _, cmd := range []string{"AUTH default wrong-s3cret", "AUTH default s3cret-token", "PING", "SMEMBERS launchdarkly:big_segment_include:" + hash,
		"smembers launchdarkly:big_segment_exclude:" + hash, "GET launchdarkly:big_segments_synchronized_on", "SECRETCOMMAND alice"} {
		exchange(cmd)
	}
	rc := client(t, addr, 2, "s3cret-token")
	if err := rc.SMembers(context.Background(), "launchdarkly:big_segment_include:"+segments.Hash("bob")).Err(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range spans.Ended() {
		if s.SpanKind() != trace.SpanKindServer {
			continue
		}
		names = append(names, s.Name())
		for _, text := range spanTexts(s) {
			for _, secret := range []string{"s3cret", "alice", hash, "big_segment", "SECRETCOMMAND"} {
				if strings.Contains(text, secret) {
					t.Errorf("span %q holds %q: %s", s.Name(), secret, text)
				}
			}
		}
		if s.Name() == "AUTH" && s.Status().Code != codes.Error && len(names) == 1 {
			t.Error("a failed AUTH is not an error")
		}
	}
	got := strings.Join(names, " ")
	if !strings.HasPrefix(got, "AUTH AUTH PING SMEMBERS SMEMBERS GET OTHER") || !strings.Contains(got, "SMEMBERS") {
		t.Errorf("spans %s", got)
	}
}

// spanTexts are a span's name, status, attributes and events as text.
func spanTexts(s sdktrace.ReadOnlySpan) []string {
	texts := []string{s.Name(), s.Status().Description}
	for _, a := range s.Attributes() {
		texts = append(texts, string(a.Key)+"="+a.Value.Emit())
	}
	for _, e := range s.Events() {
		texts = append(texts, e.Name)
		for _, a := range e.Attributes {
			texts = append(texts, a.Value.Emit())
		}
	}
	return texts
}
