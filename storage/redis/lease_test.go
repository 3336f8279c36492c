package redis_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/internal/storetest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/redis"
)

// takeLease is TakeLease that fails the test on an error.
func takeLease(t *testing.T, store *redis.Store, owner string, ttl time.Duration) bool {
	t.Helper()
	ok, err := store.TakeLease(context.Background(), owner, ttl)
	if err != nil {
		t.Fatalf("TakeLease(%s): %v", owner, err)
	}
	return ok
}

// One owner at a time holds the lease, and extends it while it does; once it expires, another
// takes it.
func TestLease(t *testing.T) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	a, b := redis.New(c, prefix), redis.New(c, prefix) // two replicas
	if !takeLease(t, a, "a", time.Hour) {
		t.Fatal("a could not take a free lease")
	}
	if takeLease(t, b, "b", time.Hour) {
		t.Fatal("b took the lease a holds")
	}
	if !takeLease(t, a, "a", 50*time.Millisecond) {
		t.Fatal("a could not extend its lease")
	}
	if ttl := c.PTTL(context.Background(), redis.LeaseKey(prefix)).Val(); ttl > 50*time.Millisecond || ttl <= 0 {
		t.Errorf("the lease's TTL is %v after a's extension to 50ms", ttl)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !takeLease(t, b, "b", time.Hour) {
		if time.Now().After(deadline) {
			t.Fatal("b could not take the lease 10s after a's expired")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	if takeLease(t, a, "a", time.Hour) {
		t.Error("a took the lease back from b")
	}
	if _, err := a.TakeLease(context.Background(), "a", 0); err == nil {
		t.Error("a TTL of 0: no error")
	}
	if got := c.Get(context.Background(), redis.LeaseKey(prefix)).Val(); got != "b" {
		t.Errorf("the lease holds %q, want b", got)
	}
}

func TestInventoryRoundTrip(t *testing.T) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	store := redis.New(c, prefix)
	ctx := context.Background()
	if data, err := store.LoadInventory(ctx); data != nil || err != nil {
		t.Fatalf("no inventory: %q, %v; want nil, nil", data, err)
	}
	for _, data := range [][]byte{[]byte(`{"contexts":3}`), bytes.Repeat([]byte("é\x00"), 100_000), {}} {
		if err := store.SaveInventory(ctx, data); err != nil {
			t.Fatal(err)
		}
		got, err := redis.New(c, prefix).LoadInventory(ctx)
		if err != nil || !bytes.Equal(got, data) || got == nil {
			t.Errorf("saved %d bytes, loaded %d: %v", len(data), len(got), err)
		}
	}
	c.Del(ctx, redis.InventoryKey(prefix))
	c.SAdd(ctx, redis.InventoryKey(prefix), "a set")
	if _, err := store.LoadInventory(ctx); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("a set at the inventory's key: %v, want WRONGTYPE", err)
	}
}

// A user who may read only gets NOPERM from TakeLease and SaveInventory, never "not taken";
// it still loads the inventory and scans.
func TestLeaseReadOnlyUser(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "reader", "on", ">pw", "~*", "&*", "+@all", "-@write").Err(); err != nil {
		t.Fatal(err)
	}
	admin.SAdd(ctx, redis.New(admin, "").IncludeKey(segments.Hash("a")), "x.g1")
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Username: "reader", Password: "pw", MaxRetries: -1})
	defer c.Close()
	store := redis.New(c, "")
	if ok, err := store.TakeLease(ctx, "r", time.Minute); ok || err == nil || !strings.Contains(err.Error(), "NOPERM") || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("TakeLease = %v, %v; want a NOPERM error", ok, err)
	}
	var redisErr goredis.Error
	if _, err := store.TakeLease(ctx, "r", time.Minute); !errors.As(err, &redisErr) {
		t.Errorf("TakeLease's error %v does not wrap Redis's", err)
	}
	if err := store.SaveInventory(ctx, []byte("{}")); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("SaveInventory = %v, want a NOPERM error", err)
	}
	if data, err := store.LoadInventory(ctx); data != nil || err != nil {
		t.Errorf("LoadInventory = %q, %v; want nil, nil", data, err)
	}
	n := 0
	if err := store.Scan(ctx, func(int) error { return nil }, func(string, segments.Membership) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("Scan as a reader: %d contexts, %v; want 1", n, err)
	}
}

// Each prefix (environment) has a lease of its own.
func TestLeasePerPrefix(t *testing.T) {
	c := redistest.Client(t)
	p1, p2 := redistest.Prefix(t, c), redistest.Prefix(t, c)
	if !takeLease(t, redis.New(c, p1), "a", time.Minute) || !takeLease(t, redis.New(c, p2), "b", time.Minute) {
		t.Error("two environments' leases are not independent")
	}
}

// ReleaseLease gives the lease back to its owner's asking, and only then (storetest.RunReleaseLease).
func TestReleaseLease(t *testing.T) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	storetest.RunReleaseLease(t, redis.New(c, prefix), redis.New(c, prefix)) // two replicas
}
