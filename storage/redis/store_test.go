package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/internal/storetest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/redis"
)

// seed writes seed under prefix in the LaunchDarkly layout.
func seed(t *testing.T, c goredis.UniversalClient, store *redis.Store, seed storetest.Seed) {
	t.Helper()
	ctx := context.Background()
	for h, e := range seed.Contexts {
		for _, r := range e.Included {
			c.SAdd(ctx, store.IncludeKey(h), r)
		}
		for _, r := range e.Excluded {
			c.SAdd(ctx, store.ExcludeKey(h), r)
		}
	}
	if seed.Cursor != "" {
		c.Set(ctx, store.CursorKey(), seed.Cursor, 0)
	}
	if !seed.SynchronizedOn.IsZero() {
		c.Set(ctx, store.SynchronizedOnKey(), strconv.FormatInt(seed.SynchronizedOn.UnixMilli(), 10), 0)
	}
}

func TestContract(t *testing.T) {
	c := redistest.Client(t)
	storetest.Run(t, func(t *testing.T, s storetest.Seed) segments.Store {
		store := redis.New(c, redistest.Prefix(t, c))
		seed(t, c, store, s)
		return store
	})
}

func TestKeyLayout(t *testing.T) {
	tests := []struct {
		prefix, include, exclude, synced string
	}{
		{"", "launchdarkly:big_segment_include:H", "launchdarkly:big_segment_exclude:H", "launchdarkly:big_segments_synchronized_on"},
		{"{ld}", "{ld}:big_segment_include:H", "{ld}:big_segment_exclude:H", "{ld}:big_segments_synchronized_on"},
	}
	for _, tt := range tests {
		s := redis.New(nil, tt.prefix)
		if got := s.IncludeKey("H"); got != tt.include {
			t.Errorf("IncludeKey = %q, want %q", got, tt.include)
		}
		if got := s.ExcludeKey("H"); got != tt.exclude {
			t.Errorf("ExcludeKey = %q, want %q", got, tt.exclude)
		}
		if got := s.SynchronizedOnKey(); got != tt.synced {
			t.Errorf("SynchronizedOnKey = %q, want %q", got, tt.synced)
		}
	}
}

// roundTrips counts what go-redis sends to the server: one per command or pipeline.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

func TestMembershipsIsOneRoundTrip(t *testing.T) {
	opts, _ := goredis.ParseURL(redistest.URL(t))
	c := goredis.NewClient(opts)
	defer c.Close()
	hook := &roundTrips{}
	c.AddHook(hook)
	store := redis.New(c, redistest.Prefix(t, c))
	// Dial and handshake first: the connection's set-up commands pass through hooks too.
	store.Memberships(context.Background(), []string{"warm-up"})
	hashes := make([]string, 100)
	for i := range hashes {
		hashes[i] = segments.Hash("user-" + strconv.Itoa(i))
	}
	for _, n := range []int{1, 100} {
		before := hook.n.Load()
		for _, r := range store.Memberships(context.Background(), hashes[:n]) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		if got := hook.n.Load() - before; got != 1 {
			t.Errorf("%d contexts took %d round trips, want 1", n, got)
		}
	}
}

func TestWrongTypeFailsThatContextOnly(t *testing.T) {
	c := redistest.Client(t)
	store := redis.New(c, redistest.Prefix(t, c))
	ctx := context.Background()
	bad, good := segments.Hash("bad"), segments.Hash("good")
	c.Set(ctx, store.IncludeKey(bad), "not a set", 0)
	c.SAdd(ctx, store.IncludeKey(good), "beta.g1")
	reads := store.Memberships(ctx, []string{bad, good})
	if reads[0].Err == nil || !strings.Contains(reads[0].Err.Error(), "WRONGTYPE") {
		t.Errorf("bad context: err = %v, want WRONGTYPE", reads[0].Err)
	}
	if reads[1].Err != nil || reads[1].Membership.Len() != 1 {
		t.Errorf("good context: %v, %v", storetest.Map(reads[1].Membership), reads[1].Err)
	}
}

func TestMetadataRejectsNonDecimal(t *testing.T) {
	c := redistest.Client(t)
	store := redis.New(c, redistest.Prefix(t, c))
	beyond9999 := strconv.FormatInt(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), 10)
	for _, v := range []string{"yesterday", "1.5", "-1", "", "0x10", " 17", "-62135596800000", beyond9999} {
		c.Set(context.Background(), store.SynchronizedOnKey(), v, 0)
		if md, err := store.Metadata(context.Background()); !errors.Is(err, segments.ErrInvalidMetadata) {
			t.Errorf("%q: LastSynchronized = %v, err %v; want ErrInvalidMetadata", v, md.LastSynchronized, err)
		}
	}
	c.Del(context.Background(), store.SynchronizedOnKey())
	c.SAdd(context.Background(), store.SynchronizedOnKey(), "a set, not a string")
	if _, err := store.Metadata(context.Background()); !errors.Is(err, segments.ErrInvalidMetadata) {
		t.Errorf("a set: err %v; want ErrInvalidMetadata", err)
	}
	c.Del(context.Background(), store.SynchronizedOnKey())
	c.Set(context.Background(), store.SynchronizedOnKey(), "0", 0)
	if md, err := store.Metadata(context.Background()); err != nil || !md.LastSynchronized.IsZero() {
		t.Errorf(`"0": %v, %v; want never synchronized`, md.LastSynchronized, err)
	}
}

func TestRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client()
	store := redis.New(c, "")
	srv.Stop()
	if r := store.Memberships(context.Background(), []string{segments.Hash("a")}); r[0].Err == nil {
		t.Error("Memberships on a stopped server: no error")
	}
	if _, err := store.Metadata(context.Background()); err == nil || errors.Is(err, segments.ErrInvalidMetadata) {
		t.Errorf("Metadata on a stopped server: %v, want an error that is not ErrInvalidMetadata", err)
	}
}

// TestRejectedPasswordFailsReads guards against trusting a pipeline that never ran: go-redis
// reports a failed AUTH on Exec only, leaving the commands with empty results and no error.
func TestRejectedPasswordFailsReads(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--requirepass", "right")
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Password: "wrong", MaxRetries: -1})
	defer c.Close()
	store := redis.New(c, "")
	for i, r := range store.Memberships(context.Background(), []string{segments.Hash("a"), segments.Hash("b")}) {
		if r.Err == nil || !strings.Contains(r.Err.Error(), "WRONGPASS") {
			t.Errorf("read %d: %v, %v; want a WRONGPASS error", i, storetest.Map(r.Membership), r.Err)
		}
	}
	if _, err := store.Metadata(context.Background()); err == nil {
		t.Error("Metadata with a rejected password: no error")
	}
}
