package dynamodb_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/internal/storetest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
)

func TestScanContract(t *testing.T) {
	t.Run("prefix", func(t *testing.T) {
		c, table := moto(t)
		storetest.RunScan(t, func(t *testing.T, s storetest.Seed) storetest.Scanner {
			p := prefix(t)
			seed(t, c, table, p, s)
			return dynamodb.New(c, table, p)
		})
	})
	t.Run("no prefix", func(t *testing.T) {
		c := dynamotest.Client(t, dynamotest.Shared(t).URL)
		storetest.RunScan(t, func(t *testing.T, s storetest.Seed) storetest.Scanner {
			table := dynamotest.Table(t, c)
			seed(t, c, table, "", s)
			return dynamodb.New(c, table, dynamodb.DefaultPrefix)
		})
	})
}

// callRecorder passes every call to a real client (moto's), and records the scans' queries and
// the reads' keys.
type callRecorder struct {
	dynamodb.API
	mu      sync.Mutex
	queries []awsdynamodb.QueryInput
	keys    []string // "namespace/key" of every key BatchGetItem asked for
}

func (r *callRecorder) Query(ctx context.Context, in *awsdynamodb.QueryInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.QueryOutput, error) {
	r.mu.Lock()
	r.queries = append(r.queries, *in)
	r.mu.Unlock()
	return r.API.Query(ctx, in, opts...)
}

func (r *callRecorder) BatchGetItem(ctx context.Context, in *awsdynamodb.BatchGetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.BatchGetItemOutput, error) {
	r.mu.Lock()
	for _, ka := range in.RequestItems {
		for _, k := range ka.Keys {
			r.keys = append(r.keys, k["namespace"].(*types.AttributeValueMemberS).Value+"/"+k["key"].(*types.AttributeValueMemberS).Value)
		}
	}
	r.mu.Unlock()
	return r.API.BatchGetItem(ctx, in, opts...)
}

// A scan queries the contexts' namespace a page of 100 at a time, consistent as the store's
// reads are, asking for the capacity consumed, and ReadUnits adds up what the answers say
// (moto says 1 unit a Query, whatever it reads).
func TestScanQueriesAndReadUnits(t *testing.T) {
	c, table := moto(t)
	p := prefix(t)
	s := storetest.ScanSeed(250)
	seed(t, c, table, p, s)
	for _, consistent := range []bool{true, false} {
		rec := &callRecorder{API: c}
		store := dynamodb.New(rec, table, p, dynamodb.WithConsistentRead(consistent))
		if diff := cmp.Diff(storetest.Want(s), storetest.Scanned(t, store)); diff != "" {
			t.Fatalf("scanned (-want +got):\n%s", diff)
		}
		if len(rec.queries) != 3 { // 253 items
			t.Errorf("%d queries for 253 items, want 3 pages of 100", len(rec.queries))
		}
		for i, q := range rec.queries {
			if aws.ToBool(q.ConsistentRead) != consistent || aws.ToInt32(q.Limit) != 100 ||
				q.ReturnConsumedCapacity != types.ReturnConsumedCapacityTotal || (i > 0) != (q.ExclusiveStartKey != nil) {
				t.Errorf("query %d: ConsistentRead %v, Limit %d, ReturnConsumedCapacity %q, ExclusiveStartKey %v; want %v, 100, TOTAL, after the first",
					i, aws.ToBool(q.ConsistentRead), aws.ToInt32(q.Limit), q.ReturnConsumedCapacity, q.ExclusiveStartKey, consistent)
			}
		}
		if got := store.ReadUnits(); got != 3 {
			t.Errorf("ReadUnits = %v after 3 queries, want moto's 1 a query", got)
		}
	}
}

// Describe names exactly the item a read of the hash asks for, and data written there is what
// the read answers.
func TestDescribeNamesTheItemRead(t *testing.T) {
	c, table := moto(t)
	for _, p := range []string{prefix(t), ""} {
		rec := &callRecorder{API: c}
		store := dynamodb.New(rec, table, p)
		h := segments.Hash("alice/" + p)
		view := store.Describe(h)
		if view.Kind != "dynamodb" || view.Prefix != p || view.Table != table || len(view.Keys) != 1 {
			t.Fatalf("Describe = %+v", view)
		}
		ns, key, _ := strings.Cut(view.Keys[0], "/")
		item := dynamotest.Key(ns, key)
		item["included"] = &types.AttributeValueMemberSS{Value: []string{"in.g1"}}
		item["excluded"] = &types.AttributeValueMemberSS{Value: []string{"out.g1"}}
		dynamotest.Put(t, c, table, item)
		r := store.Memberships(context.Background(), []string{h})[0]
		if diff := cmp.Diff(map[string]bool{"in.g1": true, "out.g1": false}, storetest.Map(r.Membership)); r.Err != nil || diff != "" {
			t.Errorf("read of the item Describe names: %v (-want +got):\n%s", r.Err, diff)
		}
		if diff := cmp.Diff(view.Keys, rec.keys); diff != "" {
			t.Errorf("items read (-described +read):\n%s", diff)
		}
	}
}

// Data of the wrong type, or an answer that says nothing of what is stored, fails the scan:
// counts of it would mislead.
func TestScanInvalidDataFails(t *testing.T) {
	_, table := moto(t)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	c := dynamotest.Client(t, proxy.URL)
	p := prefix(t)
	seed(t, c, table, p, storetest.ScanSeed(20))
	bad := dynamotest.Key(dynamotest.UserNamespace(p), segments.Hash("bad"))
	bad["included"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a.g1"}}}
	dynamotest.Put(t, c, table, bad)
	store := dynamodb.New(c, table, p)
	scan := func() error {
		return store.Scan(context.Background(), func(int) error { return nil }, func(string, segments.Membership) error { return nil })
	}
	if err := scan(); !errors.Is(err, segments.ErrInvalidData) || !strings.Contains(err.Error(), "not a string set") {
		t.Errorf("an included list: Scan = %v, want ErrInvalidData", err)
	}
	delete(bad, "included")
	dynamotest.Put(t, c, table, bad) // an item without sets: no membership, not emitted
	if err := scan(); err != nil {
		t.Fatalf("an item without sets: %v", err)
	}
	for name, body := range map[string]string{
		"no Items":             `{"Count":0,"ScannedCount":0}`,
		"an item of elsewhere": `{"Count":1,"ScannedCount":1,"Items":[{"namespace":{"S":"other:big_segments_user"},"key":{"S":"h"}}]}`,
		"an item without key":  `{"Count":1,"ScannedCount":1,"Items":[{"namespace":{"S":"` + dynamotest.UserNamespace(p) + `"}}]}`,
	} {
		proxy.On("Query", func(_ int, forward func() dynamotest.Reply) dynamotest.Reply {
			r := forward()
			r.Body = []byte(body)
			return r
		})
		if err := scan(); !errors.Is(err, segments.ErrInvalidData) {
			t.Errorf("%s: Scan = %v, want ErrInvalidData", name, err)
		}
	}
	proxy.On("Query", func(int, func() dynamotest.Reply) dynamotest.Reply {
		return dynamotest.Error(http.StatusBadRequest, "AccessDeniedException", "not allowed")
	})
	if err := scan(); dynamodb.ErrorCode(err) != "AccessDeniedException" {
		t.Errorf("a denied Query: Scan = %v, want AccessDeniedException", err)
	}
}

// scanObserver is an Observer that adds up the read units of queries.
type scanObserver struct {
	mu    sync.Mutex
	units float64
}

func (o *scanObserver) Request(string, string, time.Duration) {}
func (o *scanObserver) UnprocessedRetried(int)                {}
func (o *scanObserver) ConsumedReadCapacity(op string, units float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if op == "Query" {
		o.units += units
	}
}

// The client's Observer is told of the read units a scan's queries consumed, as ReadUnits is.
func TestScanObserved(t *testing.T) {
	_, table := moto(t)
	dynamotest.Env(t, dynamotest.Shared(t).URL)
	obs := &scanObserver{}
	client, err := dynamodb.NewClient(context.Background(), dynamodb.ClientOptions{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p := prefix(t)
	seed(t, dynamotest.Client(t, dynamotest.Shared(t).URL), table, p, storetest.ScanSeed(120))
	store := dynamodb.New(client, table, p)
	if got := len(storetest.Scanned(t, store)); got != 123 {
		t.Fatalf("scanned %d contexts, want 123", got)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.units != 2 || store.ReadUnits() != 2 {
		t.Errorf("observed %v read units, ReadUnits %v; want 2 each (moto's 1 a query, 2 pages)", obs.units, store.ReadUnits())
	}
}
