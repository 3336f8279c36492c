package dynamodb_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
)

// newClient is a client made as main makes it, from the standard AWS variables, of
// endpoint; closed when the test ends.
func newClient(t *testing.T, endpoint string) *dynamodb.Client {
	t.Helper()
	dynamotest.Env(t, endpoint)
	c, err := dynamodb.NewClient(context.Background(), dynamodb.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestNewClientFromEnvironment(t *testing.T) {
	c, table := moto(t)
	alice := segments.Hash("alice")
	dynamotest.Patch(t, c, table, "", "", "v1", []dynamotest.Change{{Hash: alice, AddIncluded: []string{"a.g1"}}})
	url := dynamotest.Shared(t).URL
	client := newClient(t, url)
	if client.Region() != dynamotest.Region || client.Endpoint() != url {
		t.Errorf("region %q, endpoint %q; want %q, %q (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB)", client.Region(), client.Endpoint(), dynamotest.Region, url)
	}
	s := dynamodb.New(client, table, "")
	if r := s.Memberships(context.Background(), []string{alice})[0]; r.Err != nil || r.Membership.Len() != 1 {
		t.Errorf("read through NewClient's client: %v, %v", r.Membership, r.Err)
	}
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	if _, err := dynamodb.NewClient(context.Background(), dynamodb.ClientOptions{}); err == nil {
		t.Error("NewClient without a region: no error")
	}
}

// Every fault is an error of the contexts read, and of the status poll, once the client's
// attempts are spent or the caller's deadline passes; throttling and server errors are
// retried, within that deadline, and refusals are not.
func TestFaults(t *testing.T) {
	_, table := moto(t)
	throttle := func(code string) dynamotest.Rule {
		return func(int, func() dynamotest.Reply) dynamotest.Reply {
			return dynamotest.Error(http.StatusBadRequest, code, "slow down")
		}
	}
	tests := []struct {
		name     string
		rule     dynamotest.Rule
		timeout  time.Duration
		code     string // ErrorCode of the error, "" for a success
		attempts int    // calls of each read
	}{
		{"provisioned throughput exceeded", throttle("ProvisionedThroughputExceededException"), 10 * time.Second, "ProvisionedThroughputExceededException", dynamodb.DefaultMaxAttempts},
		{"throttling", throttle("ThrottlingException"), 10 * time.Second, "ThrottlingException", dynamodb.DefaultMaxAttempts},
		{"request limit exceeded", throttle("RequestLimitExceeded"), 10 * time.Second, "RequestLimitExceeded", dynamodb.DefaultMaxAttempts},
		{"internal server error", func(int, func() dynamotest.Reply) dynamotest.Reply {
			return dynamotest.Error(http.StatusInternalServerError, "InternalServerError", "oops")
		}, 10 * time.Second, "InternalServerError", dynamodb.DefaultMaxAttempts},
		{"503 without a body", func(int, func() dynamotest.Reply) dynamotest.Reply {
			return dynamotest.Reply{Status: http.StatusServiceUnavailable}
		}, 10 * time.Second, "http_5xx", dynamodb.DefaultMaxAttempts},
		{"access denied is not retried", func(int, func() dynamotest.Reply) dynamotest.Reply {
			return dynamotest.Error(http.StatusBadRequest, "AccessDeniedException", "no")
		}, 10 * time.Second, "AccessDeniedException", 1},
		{"a hang ends at the deadline", func(int, func() dynamotest.Reply) dynamotest.Reply {
			return dynamotest.Reply{Hang: true}
		}, 200 * time.Millisecond, "deadline_exceeded", 1},
		{"throttled once, then answered", func(n int, forward func() dynamotest.Reply) dynamotest.Reply {
			if n%2 == 1 {
				return dynamotest.Error(http.StatusBadRequest, "ProvisionedThroughputExceededException", "slow down")
			}
			return forward()
		}, 10 * time.Second, "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
			proxy.On("BatchGetItem", tt.rule)
			s := dynamodb.New(newClient(t, proxy.URL), table, "")
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			reads := s.Memberships(ctx, []string{segments.Hash("a"), segments.Hash("b")})
			for i, r := range reads {
				if got := dynamodb.ErrorCode(r.Err); got != tt.code {
					t.Errorf("read %d: %v (code %q), want code %q", i, r.Err, got, tt.code)
				}
			}
			if n := proxy.Calls("BatchGetItem"); n != tt.attempts {
				t.Errorf("memberships: %d calls, want %d", n, tt.attempts)
			}
			ctx, cancel = context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			_, err := s.Metadata(ctx)
			if got := dynamodb.ErrorCode(err); got != tt.code || errors.Is(err, segments.ErrInvalidMetadata) {
				t.Errorf("metadata: %v (code %q), want code %q, not ErrInvalidMetadata", err, got, tt.code)
			}
		})
	}
}

// Status gives up a hung read of the metadata at StatusTimeout, whatever its caller's context.
func TestStatusHungReadIsBounded(t *testing.T) {
	_, table := moto(t)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	proxy.On("BatchGetItem", func(int, func() dynamotest.Reply) dynamotest.Reply { return dynamotest.Reply{Hang: true} })
	stores := dynamodb.NewStores(newClient(t, proxy.URL), table, []string{"a", "b"})
	// The caller's own bound is longer than StatusTimeout and shorter than the client's call
	// timeout: if it has not ended, Status's bound ended the read.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for i, r := range dynamodb.Status(ctx, stores...) {
		if code := dynamodb.ErrorCode(r.Err); code != "deadline_exceeded" {
			t.Errorf("environment %d: %v (code %q), want deadline_exceeded", i, r.Err, code)
		}
	}
	if ctx.Err() != nil {
		t.Error("the read ended at the caller's bound, not at StatusTimeout")
	}
}

func TestMissingTable(t *testing.T) {
	s := dynamodb.New(newClient(t, dynamotest.Shared(t).URL), "bigsegtest-no-such-table", "")
	r := s.Memberships(context.Background(), []string{segments.Hash("a")})[0]
	if code := dynamodb.ErrorCode(r.Err); code != "ResourceNotFoundException" || !strings.Contains(r.Err.Error(), "table bigsegtest-no-such-table in region "+dynamotest.Region) {
		t.Errorf("memberships: %v (code %q), want ResourceNotFoundException naming the table and region", r.Err, code)
	}
	if _, err := s.Metadata(context.Background()); dynamodb.ErrorCode(err) != "ResourceNotFoundException" {
		t.Errorf("metadata: %v, want ResourceNotFoundException", err)
	}
}

// AWS_MAX_ATTEMPTS is the SDK's variable, and NewClient honors it.
func TestMaxAttemptsFromEnvironment(t *testing.T) {
	_, table := moto(t)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	proxy.On("BatchGetItem", func(int, func() dynamotest.Reply) dynamotest.Reply {
		return dynamotest.Error(http.StatusBadRequest, "ThrottlingException", "slow down")
	})
	dynamotest.Env(t, proxy.URL)
	t.Setenv("AWS_MAX_ATTEMPTS", "5")
	c, err := dynamodb.NewClient(context.Background(), dynamodb.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := dynamodb.New(c, table, "").Memberships(context.Background(), []string{segments.Hash("a")})[0]; r.Err == nil {
		t.Error("no error")
	}
	if n := proxy.Calls("BatchGetItem"); n != 5 {
		t.Errorf("%d calls, want 5", n)
	}
}

// An answer that says nothing of the keys asked for (no table under Responses, or null for
// its items, none of them unprocessed), or whose body is not the one DynamoDB sent, fails the read: it is never read
// as "no item". An answer that names the table with no items is a read of no items.
func TestAnswersThatSayNothing(t *testing.T) {
	c, table := moto(t)
	alice, bob := segments.Hash("alice"), segments.Hash("bob")
	dynamotest.Patch(t, c, table, "", "", "v1", []dynamotest.Change{{Hash: alice, AddIncluded: []string{"a.g1"}}})
	reply := func(body string) dynamotest.Rule {
		return func(_ int, forward func() dynamotest.Reply) dynamotest.Reply {
			r := forward()
			r.Body = []byte(body)
			return r
		}
	}
	tests := []struct {
		name string
		rule dynamotest.Rule
		ok   bool // the read of bob, who has no item, succeeds
	}{
		{"{}", reply(`{}`), false},
		{"an empty body", reply(``), false},
		{"no table under Responses", reply(`{"Responses":{},"UnprocessedKeys":{}}`), false},
		{"the table with null for its items", reply(`{"Responses":{"` + table + `":null},"UnprocessedKeys":{}}`), false},
		{"a body cut to nothing, DynamoDB's checksum kept", func(_ int, forward func() dynamotest.Reply) dynamotest.Reply {
			r := forward()
			if r.Header.Get("X-Amz-Crc32") == "" {
				t.Error("moto sent no X-Amz-Crc32")
			}
			r.Body, r.KeepChecksum = nil, true
			return r
		}, false},
		{"a body changed, DynamoDB's checksum kept", func(_ int, forward func() dynamotest.Reply) dynamotest.Reply {
			r := forward()
			r.Body, r.KeepChecksum = []byte(`{"Responses":{"`+table+`":[]},"UnprocessedKeys":{}}`), true
			return r
		}, false},
		{"the table with no items", reply(`{"Responses":{"` + table + `":[]},"UnprocessedKeys":{}}`), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
			proxy.On("BatchGetItem", tt.rule)
			s := dynamodb.New(newClient(t, proxy.URL), table, "")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i, r := range s.Memberships(ctx, []string{alice, bob}) {
				if tt.ok && (r.Err != nil || r.Membership.Len() != 0) || !tt.ok && r.Err == nil {
					t.Errorf("read %d: %v, %v; want a failed read: %v", i, r.Membership, r.Err, !tt.ok)
				}
			}
			if md, err := s.Metadata(ctx); tt.ok != (err == nil) || errors.Is(err, segments.ErrInvalidMetadata) {
				t.Errorf("metadata: %+v, %v; want a failed read (not invalid metadata): %v", md, err, !tt.ok)
			}
		})
	}
}
