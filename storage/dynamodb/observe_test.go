package dynamodb_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
)

// recorder is an Observer that remembers what it was told.
type recorder struct {
	mu          sync.Mutex
	requests    map[string]int // "operation code", code "ok" for ""
	durations   int            // requests told with a duration >= 0
	capacity    float64
	unprocessed int
}

func (r *recorder) Request(op, code string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if code == "" {
		code = "ok"
	}
	if r.requests == nil {
		r.requests = map[string]int{}
	}
	r.requests[op+" "+code]++
	if d >= 0 {
		r.durations++
	}
}

func (r *recorder) ConsumedReadCapacity(op string, units float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if op == "BatchGetItem" {
		r.capacity += units
	}
}

func (r *recorder) UnprocessedRetried(keys int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unprocessed += keys
}

// The observer is told of every attempt, with its code, of the read capacity consumed and of
// the unprocessed keys asked for again: against moto, through the proxy's faults.
func TestObserver(t *testing.T) {
	c, table := moto(t)
	hashes := []string{segments.Hash("alice"), segments.Hash("bob"), segments.Hash("carol")}
	var changes []dynamotest.Change
	for _, h := range hashes {
		changes = append(changes, dynamotest.Change{Hash: h, AddIncluded: []string{"a.g1"}})
	}
	dynamotest.Patch(t, c, table, "", "", "v1", changes)
	throttle := func(code string) dynamotest.Rule {
		return func(int, func() dynamotest.Reply) dynamotest.Reply {
			return dynamotest.Error(http.StatusBadRequest, code, "slow down")
		}
	}
	tests := []struct {
		name         string
		rule         dynamotest.Rule
		timeout      time.Duration
		requests     map[string]int
		capacity     bool // some read capacity consumed
		unprocessed  int
		readsSucceed bool
	}{
		{"a read", nil, 10 * time.Second, map[string]int{"BatchGetItem ok": 1}, true, 0, true},
		{"throttled", throttle("ThrottlingException"), 10 * time.Second,
			map[string]int{"BatchGetItem ThrottlingException": dynamodb.DefaultMaxAttempts}, false, 0, false},
		{"throughput exceeded once", func(n int, forward func() dynamotest.Reply) dynamotest.Reply {
			if n == 1 {
				return dynamotest.Error(http.StatusBadRequest, "ProvisionedThroughputExceededException", "slow down")
			}
			return forward()
		}, 10 * time.Second, map[string]int{"BatchGetItem ProvisionedThroughputExceededException": 1, "BatchGetItem ok": 1}, true, 0, true},
		{"two keys unprocessed once", func(n int, forward func() dynamotest.Reply) dynamotest.Reply {
			if n == 1 {
				return dynamotest.Unprocess(forward(), 2)
			}
			return forward()
		}, 10 * time.Second, map[string]int{"BatchGetItem ok": 2}, true, 2, true},
		{"a 503", func(int, func() dynamotest.Reply) dynamotest.Reply {
			return dynamotest.Reply{Status: http.StatusServiceUnavailable}
		}, 10 * time.Second, map[string]int{"BatchGetItem http_5xx": dynamodb.DefaultMaxAttempts}, false, 0, false},
		{"a hang", func(int, func() dynamotest.Reply) dynamotest.Reply {
			return dynamotest.Reply{Hang: true}
		}, 200 * time.Millisecond, map[string]int{"BatchGetItem deadline_exceeded": 1}, false, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
			proxy.On("BatchGetItem", tt.rule)
			rec := &recorder{}
			dynamotest.Env(t, proxy.URL)
			client, err := dynamodb.NewClient(context.Background(), dynamodb.ClientOptions{Observer: rec})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(client.Close)
			s := dynamodb.New(client, table, "", dynamodb.WithObserver(rec))
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			for i, r := range s.Memberships(ctx, hashes) {
				if ok := r.Err == nil && r.Membership.Len() == 1; ok != tt.readsSucceed {
					t.Errorf("read %d: %v, %v; want success %v", i, r.Membership, r.Err, tt.readsSucceed)
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if diff := cmp.Diff(tt.requests, rec.requests); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			calls := 0
			for _, n := range rec.requests {
				calls += n
			}
			if calls != proxy.Calls("BatchGetItem") || rec.durations != calls {
				t.Errorf("%d requests observed (%d with a duration), the proxy had %d", calls, rec.durations, proxy.Calls("BatchGetItem"))
			}
			if (rec.capacity > 0) != tt.capacity {
				t.Errorf("read capacity consumed %v, want some: %v", rec.capacity, tt.capacity)
			}
			if rec.unprocessed != tt.unprocessed {
				t.Errorf("unprocessed keys retried %d, want %d", rec.unprocessed, tt.unprocessed)
			}
		})
	}
}

// The labels an observer is given come from fixed sets, whatever the error.
func TestObserverLabelsAreBounded(t *testing.T) {
	_, table := moto(t)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	proxy.On("BatchGetItem", func(n int, forward func() dynamotest.Reply) dynamotest.Reply {
		// A code of DynamoDB's unknown to bigseg, a code that is text of the request, a 418.
		switch n % 3 {
		case 0:
			return dynamotest.Error(http.StatusBadRequest, "SomeNewException", "new")
		case 1:
			return dynamotest.Error(http.StatusBadRequest, "alice@example.com", "a key")
		}
		return dynamotest.Reply{Status: http.StatusTeapot, Body: []byte("teapot")}
	})
	rec := &recorder{}
	dynamotest.Env(t, proxy.URL)
	client, err := dynamodb.NewClient(context.Background(), dynamodb.ClientOptions{Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	s := dynamodb.New(client, table, "", dynamodb.WithObserver(rec))
	for range 3 {
		_ = s.Memberships(context.Background(), []string{segments.Hash("alice")})
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.requests) == 0 {
		t.Fatal("no requests observed")
	}
	codes := append(dynamodb.ErrorCodes(), "ok")
	for k := range rec.requests {
		op, code, _ := strings.Cut(k, " ")
		if !slices.Contains(dynamodb.Operations(), op) || !slices.Contains(codes, code) {
			t.Errorf("observed %q: not of Operations and ErrorCodes", k)
		}
	}
}
