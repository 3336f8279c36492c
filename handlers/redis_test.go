package handlers_test

import (
	"context"
	"maps"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/redis"
)

// TestNotYetPolledThenAvailableWithRealRedis shows the first transition on a real Redis: a
// service whose poller has not run yet is not ready and says so in /status; one poll later it
// is available and ready.
func TestNotYetPolledThenAvailableWithRealRedis(t *testing.T) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	store := redis.New(c, prefix)
	synchronizedOn, _ := redis.MetadataKeys(prefix)
	c.Set(context.Background(), synchronizedOn, strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
	svc := oneService(store)
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "redis"}, svc))
	t.Cleanup(srv.Close)

	if resp, body := get(t, srv.URL+"/readyz"); resp.StatusCode != 503 {
		t.Fatalf("/readyz before the first poll: %d %s", resp.StatusCode, body)
	}
	if st := apitest.Decode[statusJSON](t, mustGet(t, srv.URL+"/status")); st.CheckedAt != nil || st.Available {
		t.Fatalf("/status before the first poll: %+v", st)
	}
	svc.Poll(context.Background())
	if resp, body := get(t, srv.URL+"/readyz"); resp.StatusCode != 200 {
		t.Fatalf("/readyz after the first poll: %d %s", resp.StatusCode, body)
	}
	if st := apitest.Decode[statusJSON](t, mustGet(t, srv.URL+"/status")); st.CheckedAt == nil || !st.Available || st.Stale || st.Store != "redis" {
		t.Fatalf("/status after the first poll: %+v", st)
	}
}

func mustGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, body := get(t, url)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, body)
	}
	return body
}

// TestExplainWithRealRedis: explain's sets are what Redis holds at the store's keys (and, where
// the store names its keys, those are the keys it names), and the lookup's memberships.
func TestExplainWithRealRedis(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	store := redis.New(c, prefix)
	synchronizedOn, _ := redis.MetadataKeys(prefix)
	hash := segments.Hash("org/acme:user 42")
	c.Set(ctx, synchronizedOn, strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
	c.SAdd(ctx, store.IncludeKey(hash), "beta.g3", "both.g1")
	c.SAdd(ctx, store.ExcludeKey(hash), "blocked.g1", "both.g1")
	svc := oneService(store)
	svc.Poll(ctx)
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "redis"}, svc))
	t.Cleanup(srv.Close)

	x := explain(t, srv.URL+"/memberships/"+url.PathEscape("org/acme:user 42")+"/explain")
	included, excluded := c.SMembers(ctx, store.IncludeKey(hash)).Val(), c.SMembers(ctx, store.ExcludeKey(hash)).Val()
	slices.Sort(included)
	excluded = slices.DeleteFunc(excluded, func(r string) bool { return slices.Contains(included, r) }) // included wins
	slices.Sort(excluded)
	if !slices.Equal(x.Read.Included, included) || !slices.Equal(x.Read.Excluded, excluded) || x.Status != "HEALTHY" {
		t.Errorf("read %+v, status %s; Redis holds %v and %v", x.Read, x.Status, included, excluded)
	}
	if want := map[string]bool{"beta.g3": true, "both.g1": true, "blocked.g1": false}; !maps.Equal(x.Memberships, want) {
		t.Errorf("memberships %v, want %v", x.Memberships, want)
	}
	var wantKeys []string
	if _, ok := any(store).(handlers.Describer); ok {
		wantKeys = []string{store.IncludeKey(hash), store.ExcludeKey(hash)}
	}
	if !slices.Equal(x.Read.Keys, wantKeys) { // the include set, then the exclude set
		t.Errorf("keys %q, want %q", x.Read.Keys, wantKeys)
	}
}

// TestExplainWithDynamoDB: on DynamoDB (moto), explain's sets are the item's, the table is
// named, and, where the store names its items, the one item read is the one it names.
func TestExplainWithDynamoDB(t *testing.T) {
	ctx := context.Background()
	client := dynamotest.Client(t, dynamotest.Shared(t).URL)
	table := dynamotest.Table(t, client)
	store := dynamodb.New(client, table, "ld-prod")
	key := "org/acme:user 42"
	if _, err := store.Load(ctx, []fixture.Context{{Key: key, Hash: segments.Hash(key), Included: []string{"beta.g3", "both.g1"},
		Excluded: []string{"blocked.g1", "both.g1"}}}, fixture.LoadOptions{SynchronizedOn: time.Now()}); err != nil {
		t.Fatal(err)
	}
	svc := oneService(store)
	svc.Poll(ctx)
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "dynamodb", StoreTable: table}, svc))
	t.Cleanup(srv.Close)

	x := explain(t, srv.URL+"/memberships/"+url.PathEscape(key)+"/explain")
	if !slices.Equal(x.Read.Included, []string{"beta.g3", "both.g1"}) || !slices.Equal(x.Read.Excluded, []string{"blocked.g1"}) ||
		x.Status != "HEALTHY" || x.Store.Kind != "dynamodb" || x.Store.Table != table {
		t.Errorf("%+v", x)
	}
	var wantKeys []string
	if _, ok := any(store).(handlers.Describer); ok {
		wantKeys = []string{store.UserNamespace() + "/" + segments.Hash(key)}
	}
	if !slices.Equal(x.Read.Keys, wantKeys) {
		t.Errorf("keys %q, want %q", x.Read.Keys, wantKeys)
	}
}
