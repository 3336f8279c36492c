package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The proxy's counts: calls by operation, items by what they are, read units by consistency.
func TestCountingProxyCounts(t *testing.T) {
	p := &countingProxy{n: counts{calls: map[string]int64{}}}
	p.count("DynamoDB_20120810.GetItem", []byte(`{"TableName":"t","ConsistentRead":true,"Key":{"namespace":{"S":"big_segments_user"},"key":{"S":"h"}}}`))
	p.count("DynamoDB_20120810.GetItem", []byte(`{"TableName":"t","ConsistentRead":true,"Key":{"namespace":{"S":"big_segments_metadata"},"key":{"S":"big_segments_metadata"}}}`))
	p.count("DynamoDB_20120810.BatchGetItem", []byte(`{"RequestItems":{"t":{"ConsistentRead":false,"Keys":[
		{"namespace":{"S":"p:big_segments_user"},"key":{"S":"a"}},{"namespace":{"S":"p:big_segments_user"},"key":{"S":"b"}},
		{"namespace":{"S":"p:big_segments_metadata"},"key":{"S":"p:big_segments_metadata"}}]}}}`))
	p.count("DynamoDB_20120810.Query", []byte(`{}`))
	p.count("DynamoDB_20120810.ListTables", nil)
	got := p.snapshot()
	want := counts{calls: map[string]int64{"GetItem": 2, "BatchGetItem": 1, "Query": 1, "ListTables": 1},
		memberships: 3, metadata: 2, membershipRCU: 2, metaRCU: 1.5, queries: 1, lookupCalls: 2, pollCalls: 1}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(counts{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if d := got.sub(counts{calls: map[string]int64{"GetItem": 1}, memberships: 1}); d.calls["GetItem"] != 1 || d.memberships != 2 || d.total() != 4 {
		t.Errorf("sub: %+v", d)
	}
}
