package dynamodb_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/internal/storetest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
)

func takeLease(t *testing.T, store *dynamodb.Store, owner string, ttl time.Duration) bool {
	t.Helper()
	ok, err := store.TakeLease(context.Background(), owner, ttl)
	if err != nil {
		t.Fatalf("TakeLease(%s): %v", owner, err)
	}
	return ok
}

// expiresAt is the expiry the lease item holds, in unix milliseconds.
func expiresAt(t *testing.T, c *awsdynamodb.Client, table, p string) (owner string, ms int64) {
	t.Helper()
	item := dynamotest.Item(t, c, table, dynamotest.Key(p+":bigseg_inventory", "lease"))
	o, _ := item["owner"].(*types.AttributeValueMemberS)
	x, _ := item["expiresAt"].(*types.AttributeValueMemberN)
	if o == nil || x == nil {
		t.Fatalf("the lease item is %v, want an owner and an expiresAt", item)
	}
	ms, err := strconv.ParseInt(x.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return o.Value, ms
}

// One owner at a time holds the lease, and extends it while it does; once it expires (by the
// clock of the replica that asks), another takes it. Expiry is seen without waiting for a
// TTL: the test writes a lease that expired into the table, as a replica that stopped would
// have left it.
func TestLease(t *testing.T) {
	c, table := moto(t)
	p := prefix(t)
	a, b := dynamodb.New(c, table, p), dynamodb.New(c, table, p)
	if !takeLease(t, a, "a", time.Hour) {
		t.Fatal("a could not take a free lease")
	}
	if takeLease(t, b, "b", time.Hour) {
		t.Fatal("b took the lease a holds")
	}
	_, first := expiresAt(t, c, table, p)
	if !takeLease(t, a, "a", 2*time.Hour) {
		t.Fatal("a could not extend its lease")
	}
	if _, extended := expiresAt(t, c, table, p); extended < first+int64(time.Hour/time.Millisecond) {
		t.Errorf("extended to %d, want an hour past %d", extended, first)
	}
	item := dynamotest.Key(p+":bigseg_inventory", "lease")
	item["owner"] = &types.AttributeValueMemberS{Value: "a"}
	item["expiresAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)}
	dynamotest.Put(t, c, table, item)
	if !takeLease(t, b, "b", time.Hour) {
		t.Fatal("b could not take the lease once a's expired")
	}
	if takeLease(t, a, "a", time.Hour) {
		t.Error("a took the lease back from b")
	}
	if owner, _ := expiresAt(t, c, table, p); owner != "b" {
		t.Errorf("the lease's owner is %q, want b", owner)
	}
	if _, err := a.TakeLease(context.Background(), "", time.Minute); err == nil {
		t.Error("no owner: no error")
	}
	if got := dynamodb.New(c, table, "").InventoryNamespace(); got != "bigseg_inventory" {
		t.Errorf("no prefix: InventoryNamespace %q", got)
	}
}

// A lease TakeLease wrote expires after its TTL, and another replica takes it then (polled,
// with a TTL short enough to pass quickly).
func TestLeaseExpires(t *testing.T) {
	c, table := moto(t)
	p := prefix(t)
	a, b := dynamodb.New(c, table, p), dynamodb.New(c, table, p)
	if !takeLease(t, a, "a", 50*time.Millisecond) {
		t.Fatal("a could not take a free lease")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !takeLease(t, b, "b", time.Hour) {
		if time.Now().After(deadline) {
			t.Fatal("b never took the lease a let lapse")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if owner, _ := expiresAt(t, c, table, p); owner != "b" {
		t.Errorf("the lease's owner is %q, want b", owner)
	}
}

// A user who may not write gets DynamoDB's AccessDeniedException from TakeLease and
// SaveInventory, never "not taken".
func TestLeaseAccessDenied(t *testing.T) {
	_, table := moto(t)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	proxy.On("PutItem", func(int, func() dynamotest.Reply) dynamotest.Reply {
		return dynamotest.Error(http.StatusBadRequest, "AccessDeniedException", "User: reader is not authorized to perform: dynamodb:PutItem")
	})
	store := dynamodb.New(dynamotest.Client(t, proxy.URL), table, prefix(t))
	ok, err := store.TakeLease(context.Background(), "a", time.Minute)
	if ok || dynamodb.ErrorCode(err) != "AccessDeniedException" || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("TakeLease = %v, %v; want AccessDeniedException", ok, err)
	}
	if err := store.SaveInventory(context.Background(), []byte("{}")); dynamodb.ErrorCode(err) != "AccessDeniedException" {
		t.Errorf("SaveInventory = %v, want AccessDeniedException", err)
	}
	if data, err := store.LoadInventory(context.Background()); data != nil || err != nil {
		t.Errorf("LoadInventory = %q, %v; want nil, nil", data, err)
	}
}

func TestInventoryRoundTrip(t *testing.T) {
	c, table := moto(t)
	p := prefix(t)
	store := dynamodb.New(c, table, p)
	ctx := context.Background()
	if data, err := store.LoadInventory(ctx); data != nil || err != nil {
		t.Fatalf("no inventory: %q, %v; want nil, nil", data, err)
	}
	random := make([]byte, 380_000) // incompressible: gzipped, just under 400 KB
	_, _ = rand.Read(random)
	for _, data := range [][]byte{[]byte(`{"contexts":3}`), bytes.Repeat([]byte(`{"ref":"beta.g1","included":1},`), 200_000), random, {}} {
		if err := store.SaveInventory(ctx, data); err != nil {
			t.Fatalf("%d bytes: %v", len(data), err)
		}
		got, err := dynamodb.New(c, table, p).LoadInventory(ctx)
		if err != nil || !bytes.Equal(got, data) || got == nil {
			t.Errorf("saved %d bytes, loaded %d: %v", len(data), len(got), err)
		}
	}
	// Over DynamoDB's item size once gzipped: refused before it is sent, the last one kept.
	big := make([]byte, 420_000)
	_, _ = rand.Read(big)
	if err := store.SaveInventory(ctx, big); err == nil || !strings.Contains(err.Error(), "400 KB") {
		t.Errorf("%d random bytes: %v, want an error naming DynamoDB's 400 KB", len(big), err)
	}
	if got, err := store.LoadInventory(ctx); err != nil || got == nil || len(got) != 0 {
		t.Errorf("after a refused save: %d bytes, %v; want the last saved (0 bytes)", len(got), err)
	}
}

// A saved inventory that is not what SaveInventory writes is invalid data, never an
// inventory nor "none".
func TestInventoryInvalid(t *testing.T) {
	c, table := moto(t)
	p := prefix(t)
	store := dynamodb.New(c, table, p)
	key := dynamotest.Key(p+":bigseg_inventory", "result")
	for name, data := range map[string]types.AttributeValue{
		"a string":         &types.AttributeValueMemberS{Value: "{}"},
		"binary, not gzip": &types.AttributeValueMemberB{Value: []byte("{}")},
		"gzip cut short":   &types.AttributeValueMemberB{Value: []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0xaa}},
	} {
		item := dynamotest.Key(p+":bigseg_inventory", "result")
		item["data"] = data
		dynamotest.Put(t, c, table, item)
		if got, err := store.LoadInventory(context.Background()); !errors.Is(err, segments.ErrInvalidData) {
			t.Errorf("%s: LoadInventory = %q, %v; want ErrInvalidData", name, got, err)
		}
	}
	dynamotest.Put(t, c, table, key) // no data at all
	if _, err := store.LoadInventory(context.Background()); !errors.Is(err, segments.ErrInvalidData) {
		t.Errorf("no data: LoadInventory = %v, want ErrInvalidData", err)
	}
}

// ReleaseLease gives the lease back to its owner's asking, and only then (storetest.RunReleaseLease).
func TestReleaseLease(t *testing.T) {
	c, table := moto(t)
	p := prefix(t)
	storetest.RunReleaseLease(t, dynamodb.New(c, table, p), dynamodb.New(c, table, p)) // two replicas
}
