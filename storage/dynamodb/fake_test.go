package dynamodb_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithy "github.com/aws/smithy-go"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
)

// fake answers BatchGetItem with answer, and records what it was asked; other calls are not
// made by reads.
type fake struct {
	dynamodb.API
	answer func(in *awsdynamodb.BatchGetItemInput) (*awsdynamodb.BatchGetItemOutput, error)

	mu     sync.Mutex
	inputs []*awsdynamodb.BatchGetItemInput
}

func (f *fake) BatchGetItem(ctx context.Context, in *awsdynamodb.BatchGetItemInput, _ ...func(*awsdynamodb.Options)) (*awsdynamodb.BatchGetItemOutput, error) {
	f.mu.Lock()
	f.inputs = append(f.inputs, in)
	f.mu.Unlock()
	return f.answer(in)
}

func (f *fake) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.inputs)
}

// item is a context's item holding ref in its included set.
func item(key map[string]types.AttributeValue, ref string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"namespace": key["namespace"], "key": key["key"],
		"included": &types.AttributeValueMemberSS{Value: []string{ref}}}
}

// keep returns the first key of each call as an item, and the others as unprocessed.
func keepFirst(in *awsdynamodb.BatchGetItemInput) (*awsdynamodb.BatchGetItemOutput, error) {
	out := &awsdynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{},
		UnprocessedKeys: map[string]types.KeysAndAttributes{}}
	for table, ka := range in.RequestItems {
		out.Responses[table] = []map[string]types.AttributeValue{item(ka.Keys[0], "a.g1")}
		if len(ka.Keys) > 1 {
			out.UnprocessedKeys[table] = types.KeysAndAttributes{Keys: ka.Keys[1:]}
		}
	}
	return out, nil
}

// A key left unprocessed at every try is an error of its context once the deadline passes,
// never "no membership"; the keys that were read are answered.
func TestUnprocessedUntilTheDeadline(t *testing.T) {
	f := &fake{answer: func(in *awsdynamodb.BatchGetItemInput) (*awsdynamodb.BatchGetItemOutput, error) {
		out, _ := keepFirst(in)
		if len(in.RequestItems["t"].Keys) < 3 { // the first call only returns an item
			out.Responses = nil
			out.UnprocessedKeys = in.RequestItems
		}
		return out, nil
	}}
	s := dynamodb.New(f, "t", "")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	reads := s.Memberships(ctx, []string{segments.Hash("a"), segments.Hash("b"), segments.Hash("c")})
	if reads[0].Err != nil || reads[0].Membership.Len() != 1 {
		t.Errorf("the key read: %v, %v", reads[0].Membership, reads[0].Err)
	}
	for i, r := range reads[1:] {
		if !errors.Is(r.Err, dynamodb.ErrUnprocessed) || !errors.Is(r.Err, context.DeadlineExceeded) || r.Membership.Len() != 0 {
			t.Errorf("unprocessed key %d: %v, %v; want ErrUnprocessed and the deadline", i+1, r.Membership, r.Err)
		}
		if code := dynamodb.ErrorCode(r.Err); code != "unprocessed" {
			t.Errorf("unprocessed key %d: code %q", i+1, code)
		}
	}
	if f.calls() < 2 {
		t.Errorf("%d calls: the unprocessed keys were not asked for again", f.calls())
	}
}

// Without a deadline, the retries of unprocessed keys still end.
func TestUnprocessedWithoutADeadlineEnds(t *testing.T) {
	f := &fake{answer: func(in *awsdynamodb.BatchGetItemInput) (*awsdynamodb.BatchGetItemOutput, error) {
		return &awsdynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
	}}
	r := dynamodb.New(f, "t", "").Memberships(context.Background(), []string{segments.Hash("a")})[0]
	if !errors.Is(r.Err, dynamodb.ErrUnprocessed) {
		t.Errorf("%v, want ErrUnprocessed", r.Err)
	}
	if n := f.calls(); n != 11 {
		t.Errorf("%d calls, want 11: the first and 10 retries", n)
	}
}

// Unprocessed keys that were not asked for leave it unknown which were: every key not
// returned fails.
func TestUnprocessedKeysNotAskedFor(t *testing.T) {
	f := &fake{answer: func(in *awsdynamodb.BatchGetItemInput) (*awsdynamodb.BatchGetItemOutput, error) {
		return &awsdynamodb.BatchGetItemOutput{UnprocessedKeys: map[string]types.KeysAndAttributes{
			"t": {Keys: []map[string]types.AttributeValue{dynamotest.Key("big_segments_user", "someone else")}}}}, nil
	}}
	r := dynamodb.New(f, "t", "").Memberships(context.Background(), []string{segments.Hash("a")})[0]
	if !errors.Is(r.Err, dynamodb.ErrUnprocessed) {
		t.Errorf("%v, want ErrUnprocessed", r.Err)
	}
}

// An item of the answer whose key is missing, not a string, or not one asked for cannot be
// matched to a context: every context it might stand for fails, none reads as no item (and so
// none is cached as "no membership").
func TestStrayItemsFailTheirRead(t *testing.T) {
	asked, other := segments.Hash("a"), segments.Hash("b")
	for _, tt := range []struct {
		name string
		item func(k map[string]types.AttributeValue) map[string]types.AttributeValue
	}{
		{"key missing", func(k map[string]types.AttributeValue) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{"namespace": k["namespace"], "included": &types.AttributeValueMemberSS{Value: []string{"a.g1"}}}
		}},
		{"key a number", func(k map[string]types.AttributeValue) map[string]types.AttributeValue {
			it := item(k, "a.g1")
			it["key"] = &types.AttributeValueMemberN{Value: "1"}
			return it
		}},
		{"namespace missing", func(k map[string]types.AttributeValue) map[string]types.AttributeValue {
			it := item(k, "a.g1")
			delete(it, "namespace")
			return it
		}},
		{"a key not asked for", func(k map[string]types.AttributeValue) map[string]types.AttributeValue {
			it := item(k, "a.g1")
			it["key"] = &types.AttributeValueMemberS{Value: "someone else"}
			return it
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fake{answer: func(in *awsdynamodb.BatchGetItemInput) (*awsdynamodb.BatchGetItemOutput, error) {
				out := &awsdynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
				for _, k := range in.RequestItems["t"].Keys {
					if k["key"].(*types.AttributeValueMemberS).Value == asked {
						out.Responses["t"] = append(out.Responses["t"], tt.item(k))
					}
				}
				return out, nil
			}}
			for i, r := range dynamodb.New(f, "t", "").Memberships(context.Background(), []string{asked, other}) {
				if !errors.Is(r.Err, segments.ErrInvalidData) {
					t.Errorf("context %d: %v, %v; want ErrInvalidData, not an answer", i, r.Membership, r.Err)
				}
			}
		})
	}
}

// A failed call fails the contexts it was for, and no others.
func TestFailedCallFailsItsContextsOnly(t *testing.T) {
	bad := segments.Hash("user-150")
	f := &fake{answer: func(in *awsdynamodb.BatchGetItemInput) (*awsdynamodb.BatchGetItemOutput, error) {
		out := &awsdynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
		for _, k := range in.RequestItems["t"].Keys {
			if k["key"].(*types.AttributeValueMemberS).Value == bad {
				return nil, &smithy.GenericAPIError{Code: "InternalServerError", Message: "oops"}
			}
			out.Responses["t"] = append(out.Responses["t"], item(k, "a.g1"))
		}
		return out, nil
	}}
	hashes := make([]string, 250)
	for i := range hashes {
		hashes[i] = segments.Hash("user-" + strconv.Itoa(i))
	}
	reads := dynamodb.New(f, "t", "").Memberships(context.Background(), hashes)
	for i, r := range reads {
		if failed := i >= 100 && i < 200; failed != (r.Err != nil) || (!failed && r.Membership.Len() != 1) {
			t.Errorf("context %d: %v, %v; want failed %v", i, r.Membership, r.Err, failed)
		}
	}
	if n := f.calls(); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
}

// Reads are strongly consistent by default, ask for the sets and keys only, and never for
// more than 100 keys at once.
func TestReadOptions(t *testing.T) {
	for _, tt := range []struct {
		opts []dynamodb.Option
		want bool
	}{{nil, true}, {[]dynamodb.Option{dynamodb.WithConsistentRead(false)}, false}} {
		f := &fake{answer: func(in *awsdynamodb.BatchGetItemInput) (*awsdynamodb.BatchGetItemOutput, error) {
			return &awsdynamodb.BatchGetItemOutput{}, nil
		}}
		s := dynamodb.New(f, "t", "", tt.opts...)
		hashes := make([]string, 101)
		for i := range hashes {
			hashes[i] = strconv.Itoa(i)
		}
		s.Memberships(context.Background(), hashes)
		s.Metadata(context.Background())
		for _, in := range f.inputs {
			ka := in.RequestItems["t"]
			if len(in.RequestItems) != 1 || len(ka.Keys) > 100 || ka.ConsistentRead == nil || *ka.ConsistentRead != tt.want {
				t.Errorf("a call of %d keys, consistent %v; want at most 100, consistent %v", len(ka.Keys), ka.ConsistentRead, tt.want)
			}
			if ka.ProjectionExpression == nil || len(ka.ExpressionAttributeNames) != 4 {
				t.Errorf("projection %v %v; want four attributes", ka.ProjectionExpression, ka.ExpressionAttributeNames)
			}
		}
		if len(f.inputs) != 3 {
			t.Errorf("%d calls, want 3", len(f.inputs))
		}
	}
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}, "ProvisionedThroughputExceededException"},
		{&smithy.OperationError{ServiceID: "DynamoDB", OperationName: "BatchGetItem", Err: &smithy.GenericAPIError{Code: "ThrottlingException"}}, "ThrottlingException"},
		{&smithy.GenericAPIError{Code: "SomethingNew"}, "other"},
		{dynamodb.ErrUnprocessed, "unprocessed"},
		{segments.ErrInvalidData, "invalid_data"},
		{segments.ErrInvalidMetadata, "invalid_data"},
		{context.DeadlineExceeded, "deadline_exceeded"},
		{context.Canceled, "canceled"},
		{errors.New("boom"), "other"},
	}
	for _, tt := range tests {
		if got := dynamodb.ErrorCode(tt.err); got != tt.want {
			t.Errorf("ErrorCode(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
