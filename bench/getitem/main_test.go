package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

// fakeTable answers GetItem from items by sort key, and keeps the inputs it was given.
type fakeTable struct {
	items map[string]map[string]types.AttributeValue
	asked []*awsdynamodb.GetItemInput
}

func (f *fakeTable) GetItem(_ context.Context, in *awsdynamodb.GetItemInput, _ ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	f.asked = append(f.asked, in)
	return &awsdynamodb.GetItemOutput{Item: f.items[in.Key["key"].(*types.AttributeValueMemberS).Value]}, nil
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		name, path, key string
		item            map[string]types.AttributeValue
		want            map[string]bool
	}{
		{"member", "/memberships/user-1", "user-1", map[string]types.AttributeValue{
			"included": &types.AttributeValueMemberSS{Value: []string{"a.g1", "both.g1"}},
			"excluded": &types.AttributeValueMemberSS{Value: []string{"b.g2", "both.g1"}},
		}, map[string]bool{"a.g1": true, "b.g2": false, "both.g1": true}},
		{"no item", "/memberships/nobody", "nobody", nil, map[string]bool{}},
		{"escaped key", "/memberships/a%2Fb%20c", "a/b c", nil, map[string]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeTable{items: map[string]map[string]types.AttributeValue{hashKey(tc.key): tc.item}}
			rec := httptest.NewRecorder()
			newHandler(f, "t", "p:big_segments_user").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var got lookupResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			want := lookupResponse{ContextKey: tc.key, ContextHash: hashKey(tc.key), Memberships: tc.want, Status: "HEALTHY"}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("answer (-want +got):\n%s", d)
			}
			if len(f.asked) != 1 || !aws.ToBool(f.asked[0].ConsistentRead) || aws.ToString(f.asked[0].TableName) != "t" ||
				f.asked[0].Key["namespace"].(*types.AttributeValueMemberS).Value != "p:big_segments_user" {
				t.Errorf("reads: %+v, want one strongly consistent GetItem of t, namespace p:big_segments_user", f.asked)
			}
		})
	}
}
