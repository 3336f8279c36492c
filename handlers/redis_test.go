package handlers_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/redistest"
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
