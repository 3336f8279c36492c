package redis_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/redis"
)

// readAll reads the memberships of the given keys back through the store.
func readAll(t *testing.T, store *redis.Store, keys []string) map[string]map[string]bool {
	t.Helper()
	hashes := make([]string, len(keys))
	for i, k := range keys {
		hashes[i] = segments.Hash(k)
	}
	out := map[string]map[string]bool{}
	for i, r := range store.Memberships(context.Background(), hashes) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		out[keys[i]] = r.Membership.Map()
	}
	return out
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c) + ":glob*?[x]" // SCAN patterns must match it literally
	store := redis.New(c, prefix)
	other := redis.New(c, prefix[:len(prefix)-len(":glob*?[x]")]+":globXY") // a prefix the glob would match
	c.SAdd(ctx, other.IncludeKey(segments.Hash("bystander")), "keep.g1")
	t.Cleanup(func() { c.Del(ctx, other.IncludeKey(segments.Hash("bystander"))) })

	ctxOf := func(key string, inc, exc []string) fixture.Context {
		return fixture.Context{Hash: segments.Hash(key), Included: inc, Excluded: exc}
	}
	synced := time.UnixMilli(1764430000000)
	first := []fixture.Context{
		ctxOf("alice", []string{"a.g1", "b.g1"}, []string{"c.g1"}),
		ctxOf("bob", nil, []string{"a.g1"}),
		ctxOf("carol", []string{"a.g1"}, nil),
	}
	var progress []int
	st, err := store.Load(ctx, first, redis.LoadOptions{SynchronizedOn: synced, BatchSize: 2,
		Progress: func(done, total int) { progress = append(progress, done) }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Contexts != 3 || st.RefsAdded != 5 || !cmp.Equal(progress, []int{2, 3}) {
		t.Errorf("first load: %+v, progress %v", st, progress)
	}
	want := map[string]map[string]bool{
		"alice": {"a.g1": true, "b.g1": true, "c.g1": false},
		"bob":   {"a.g1": false},
		"carol": {"a.g1": true},
	}
	if diff := cmp.Diff(want, readAll(t, store, []string{"alice", "bob", "carol"})); diff != "" {
		t.Errorf("after load (-want +got):\n%s", diff)
	}
	if md, err := store.Metadata(ctx); err != nil || !md.LastSynchronized.Equal(synced) {
		t.Errorf("synchronized_on: %v, %v", md.LastSynchronized, err)
	}

	// Idempotent.
	st, err = store.Load(ctx, first, redis.LoadOptions{SynchronizedOn: synced})
	if err != nil || st.RefsAdded != 0 {
		t.Errorf("second load: %+v, %v; want nothing added", st, err)
	}

	// Without --replace, a load only adds.
	second := []fixture.Context{ctxOf("alice", []string{"a.g1"}, nil), ctxOf("dave", []string{"d.g1"}, nil)}
	if _, err := store.Load(ctx, second, redis.LoadOptions{SynchronizedOn: synced}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, store, []string{"alice", "bob"}); len(got["alice"]) != 3 || len(got["bob"]) != 1 {
		t.Errorf("add-only load removed something: %v", got)
	}

	// With --replace, Redis matches the file.
	st, err = store.Load(ctx, second, redis.LoadOptions{SynchronizedOn: synced.Add(time.Hour), Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.RefsRemoved != 2 || st.KeysDeleted != 2 { // alice's b.g1 and c.g1; bob's exclude set, carol's include set
		t.Errorf("replace: %+v, want 2 refs removed and 2 sets deleted", st)
	}
	want = map[string]map[string]bool{
		"alice": {"a.g1": true}, "bob": {}, "carol": {}, "dave": {"d.g1": true},
	}
	if diff := cmp.Diff(want, readAll(t, store, []string{"alice", "bob", "carol", "dave"})); diff != "" {
		t.Errorf("after replace (-want +got):\n%s", diff)
	}
	if n, _ := c.Exists(ctx, other.IncludeKey(segments.Hash("bystander"))).Result(); n != 1 {
		t.Error("replace deleted a key outside its prefix")
	}
	if v, _ := c.Get(ctx, store.SynchronizedOnKey()).Result(); v != strconv.FormatInt(synced.Add(time.Hour).UnixMilli(), 10) {
		t.Errorf("synchronized_on = %q", v)
	}
	// Every load writes a cursor: the one given, or a new one.
	if v, _ := c.Get(ctx, store.CursorKey()).Result(); v != st.Cursor || !strings.HasPrefix(v, "load-") {
		t.Errorf("cursor = %q, stats say %q", v, st.Cursor)
	}
	again, err := store.Load(ctx, second, redis.LoadOptions{SynchronizedOn: synced})
	if err != nil || again.Cursor == st.Cursor {
		t.Errorf("a second load: cursor %q (the first was %q), %v", again.Cursor, st.Cursor, err)
	}
	if st, err := store.Load(ctx, second, redis.LoadOptions{SynchronizedOn: synced, Cursor: "v9"}); err != nil || st.Cursor != "v9" {
		t.Errorf("a load with a cursor: %+v, %v", st, err)
	}
	if v, _ := c.Get(ctx, store.CursorKey()).Result(); v != "v9" {
		t.Errorf("cursor = %q, want v9", v)
	}
}
