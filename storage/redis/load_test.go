package redis_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/internal/storetest"
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
		out[keys[i]] = storetest.Map(r.Membership)
	}
	return out
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	// SCAN patterns must match the prefix literally, byte for byte (\xff is not UTF-8).
	base := redistest.Prefix(t, c)
	prefix := base + ":glob*?[x]\xff"
	store := redis.New(c, prefix)
	other := redis.New(c, base+":globXY\xff") // a prefix the glob would match
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
	var progress []fixture.LoadProgress
	st, err := store.Load(ctx, first, fixture.LoadOptions{SynchronizedOn: synced, BatchSize: 2,
		Progress: func(p fixture.LoadProgress) { progress = append(progress, p) }})
	if err != nil {
		t.Fatal(err)
	}
	wantProgress := []fixture.LoadProgress{
		{Phase: fixture.Writing, Total: 3, LoadStats: fixture.LoadStats{Contexts: 2, RefsAdded: 4}},
		{Phase: fixture.Writing, Total: 3, Done: true, LoadStats: fixture.LoadStats{Contexts: 3, RefsAdded: 5}},
	}
	if diff := cmp.Diff(wantProgress, progress); st.Contexts != 3 || st.RefsAdded != 5 || diff != "" {
		t.Errorf("first load: %+v, progress (-want +got):\n%s", st, diff)
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
	st, err = store.Load(ctx, first, fixture.LoadOptions{SynchronizedOn: synced})
	if err != nil || st.RefsAdded != 0 {
		t.Errorf("second load: %+v, %v; want nothing added", st, err)
	}

	// Without --replace, a load only adds.
	second := []fixture.Context{ctxOf("alice", []string{"a.g1"}, nil), ctxOf("dave", []string{"d.g1"}, nil)}
	if _, err := store.Load(ctx, second, fixture.LoadOptions{SynchronizedOn: synced}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, store, []string{"alice", "bob"}); len(got["alice"]) != 3 || len(got["bob"]) != 1 {
		t.Errorf("add-only load removed something: %v", got)
	}

	// With --replace, Redis matches the file.
	st, err = store.Load(ctx, second, fixture.LoadOptions{SynchronizedOn: synced.Add(time.Hour), Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.RefsRemoved != 2 || st.Deleted != 2 { // alice's b.g1 and c.g1; bob's exclude set, carol's include set
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
	// A load that changed something writes a new cursor (TestLoadCursor has the rest).
	if v, _ := c.Get(ctx, store.CursorKey()).Result(); v != st.Cursor || !strings.HasPrefix(v, "load-") || !st.CursorChanged {
		t.Errorf("cursor = %q, stats say %q (changed: %v)", v, st.Cursor, st.CursorChanged)
	}
}

// A new cursor empties the cache of every running instance, so a load writes one only when
// it changed something, or when the file gives a cursor other than the stored one.
// synchronized_on is written by every load.
func TestLoadCursor(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	store := redis.New(c, redistest.Prefix(t, c))
	alice := func(refs ...string) fixture.Context {
		return fixture.Context{Hash: segments.Hash("alice"), Included: refs}
	}
	bob := fixture.Context{Hash: segments.Hash("bob"), Excluded: []string{"b.g1"}}
	const (
		unchanged = "(unchanged)" // the cursor stored before the load
		made      = "(new)"       // a new load-... cursor
		none      = "(none)"      // no cursor key at all
	)
	steps := []struct {
		name     string
		before   func() // run first, to set up what the step is about
		contexts []fixture.Context
		opts     fixture.LoadOptions
		want     string // the cursor stored after the load, or one of the above
	}{
		{name: "nothing into nothing writes no cursor", want: none},
		{name: "first load", contexts: []fixture.Context{alice("a.g1"), bob}, want: made},
		{name: "the same again", contexts: []fixture.Context{alice("a.g1"), bob}, want: unchanged},
		{name: "a subset, adding only", contexts: []fixture.Context{alice("a.g1")}, want: unchanged},
		{name: "the same with replace", contexts: []fixture.Context{alice("a.g1"), bob}, opts: fixture.LoadOptions{Replace: true}, want: unchanged},
		{name: "a ref added", contexts: []fixture.Context{alice("a.g1", "a.g2")}, want: made},
		{name: "replace removing a ref", contexts: []fixture.Context{alice("a.g1"), bob}, opts: fixture.LoadOptions{Replace: true}, want: made},
		{name: "replace deleting an unlisted context", contexts: []fixture.Context{alice("a.g1")}, opts: fixture.LoadOptions{Replace: true}, want: made},
		{name: "the file's cursor, new", contexts: []fixture.Context{alice("a.g1")}, opts: fixture.LoadOptions{Cursor: "v9"}, want: "v9"},
		{name: "the file's cursor, stored already", contexts: []fixture.Context{alice("a.g1")}, opts: fixture.LoadOptions{Cursor: "v9"}, want: unchanged},
		{name: "no cursor, nothing changed, after the file's", contexts: []fixture.Context{alice("a.g1")}, want: unchanged},
		{name: "a stored cursor too long to be one is replaced",
			before:   func() { c.Set(ctx, store.CursorKey(), strings.Repeat("c", segments.MaxCursorBytes+1), 0) },
			contexts: []fixture.Context{alice("a.g1")}, want: made},
		{name: "a stored cursor of the wrong type is replaced",
			before:   func() { c.Del(ctx, store.CursorKey()); c.SAdd(ctx, store.CursorKey(), "x") },
			contexts: []fixture.Context{alice("a.g1")}, want: made},
		{name: "no cursor stored, nothing changed: still none",
			before:   func() { c.Del(ctx, store.CursorKey()) },
			contexts: []fixture.Context{alice("a.g1")}, want: none},
	}
	for i, step := range steps {
		if step.before != nil {
			step.before()
		}
		before, _ := c.Get(ctx, store.CursorKey()).Result()
		step.opts.SynchronizedOn = time.UnixMilli(1764430000000 + int64(i))
		st, err := store.Load(ctx, step.contexts, step.opts)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after, err := c.Get(ctx, store.CursorKey()).Result()
		if err == goredis.Nil {
			after = none
		}
		switch want := step.want; {
		case want == none && after != none, want == unchanged && after != before,
			want == made && (after == before || !strings.HasPrefix(after, "load-")),
			!strings.HasPrefix(want, "(") && after != want:
			t.Errorf("%s: cursor %.40q before, %.40q after; want %s", step.name, before, after, want)
		}
		if wantChanged := step.want != unchanged && step.want != none; st.CursorChanged != wantChanged || (after != none && st.Cursor != after) {
			t.Errorf("%s: stats say cursor %q, changed %v; Redis has %.40q, want changed %v", step.name, st.Cursor, st.CursorChanged, after, wantChanged)
		}
		if v, _ := c.Get(ctx, store.SynchronizedOnKey()).Result(); v != strconv.FormatInt(step.opts.SynchronizedOn.UnixMilli(), 10) {
			t.Errorf("%s: synchronized_on = %q, want %d", step.name, v, step.opts.SynchronizedOn.UnixMilli())
		}
	}
}

// Both phases report as they go, with counts that only grow, and end with one Done report.
func TestLoadProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Client(t)
	store := redis.New(c, redistest.Prefix(t, c))
	const listed, unlisted = 2000, 1500
	contexts := make([]fixture.Context, listed)
	for i := range contexts {
		contexts[i] = fixture.Context{Hash: segments.Hash("user-" + strconv.Itoa(i)), Included: []string{"a.g1"}}
	}
	pipe := c.Pipeline()
	for i := range unlisted {
		h := segments.Hash("gone-" + strconv.Itoa(i))
		pipe.SAdd(ctx, store.IncludeKey(h), "a.g1")
		pipe.SAdd(ctx, store.ExcludeKey(h), "b.g1")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var reports []fixture.LoadProgress
	st, err := store.Load(ctx, contexts, fixture.LoadOptions{Replace: true, BatchSize: 100,
		Progress: func(p fixture.LoadProgress) { reports = append(reports, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Contexts != listed || st.Deleted != 2*unlisted {
		t.Fatalf("load: %+v, want %d contexts written, %d sets deleted", st, listed, 2*unlisted)
	}
	byPhase := map[fixture.LoadPhase][]fixture.LoadProgress{}
	for i, p := range reports {
		if i > 0 && p.Phase < reports[i-1].Phase {
			t.Fatalf("report %d: %+v after %+v", i, p, reports[i-1])
		}
		byPhase[p.Phase] = append(byPhase[p.Phase], p)
	}
	writing, deleting := byPhase[fixture.Writing], byPhase[fixture.Deleting]
	if len(writing) != listed/100 || len(deleting) < 3 {
		t.Fatalf("%d reports while writing, want %d; %d while deleting, want a few", len(writing), listed/100, len(deleting))
	}
	for _, phase := range [][]fixture.LoadProgress{writing, deleting} {
		for i, p := range phase {
			if last := i == len(phase)-1; p.Done != last || p.Total != listed {
				t.Errorf("report %d of %d: %+v, want Done on the last only, Total %d", i+1, len(phase), p, listed)
			}
			if i > 0 && (p.Contexts < phase[i-1].Contexts || p.Scanned < phase[i-1].Scanned || p.Deleted < phase[i-1].Deleted) {
				t.Errorf("report %d: %+v after %+v: counts went back", i+1, p, phase[i-1])
			}
		}
	}
	if w := writing[4]; w.Contexts != 500 || w.RefsAdded != 500 {
		t.Errorf("the 5th report while writing: %+v, want 500 contexts, 500 refs added", w)
	}
	end := deleting[len(deleting)-1]
	if end.Scanned < listed+2*unlisted || end.Deleted != 2*unlisted || end.Contexts != listed {
		t.Errorf("the last report while deleting: %+v, want at least %d keys scanned, %d deleted", end, listed+2*unlisted, 2*unlisted)
	}
	midway := false
	for _, p := range deleting {
		midway = midway || (p.Deleted > 0 && p.Deleted < 2*unlisted)
	}
	if !midway {
		t.Error("no report while deleting counts some of the deletions but not all")
	}
}

// A dry run counts what the load would add, remove and delete, exactly as the load then does,
// and changes nothing: the sets, the cursor and the synchronization time stay as they were.
func TestLoadDryRun(t *testing.T) {
	ctxOf := func(key string, inc, exc []string) fixture.Context {
		return fixture.Context{Hash: segments.Hash(key), Included: inc, Excluded: exc}
	}
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	store := redis.New(c, prefix)
	if _, err := store.Load(ctx, []fixture.Context{ctxOf("alice", []string{"a.g1"}, nil), ctxOf("stale", []string{"a.g1"}, []string{"b.g1"})},
		fixture.LoadOptions{Cursor: "v1", SynchronizedOn: time.UnixMilli(1764420000000)}); err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		k, err := c.Keys(ctx, prefix+":*").Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(k)
		return k
	}
	metadata := func() []any {
		v, err := c.MGet(ctx, store.CursorKey(), store.SynchronizedOnKey()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	contexts := []fixture.Context{ctxOf("alice", []string{"b.g1", "b.g1"}, nil), ctxOf("bob", []string{"a.g1"}, []string{"c.g1"})}
	beforeKeys, beforeMeta, before := keys(), metadata(), readAll(t, store, []string{"alice", "bob", "stale"})
	opts := fixture.LoadOptions{Replace: true, SynchronizedOn: time.UnixMilli(1764430000000)}
	dry := opts
	dry.DryRun = true
	predicted, err := store.Load(ctx, contexts, dry)
	if err != nil {
		t.Fatal(err)
	}
	if after := readAll(t, store, []string{"alice", "bob", "stale"}); !cmp.Equal(after, before) || !slices.Equal(keys(), beforeKeys) || !cmp.Equal(metadata(), beforeMeta) {
		t.Errorf("a dry run changed the store: %s", cmp.Diff(before, after))
	}
	if got := predicted; got.Contexts != 2 || got.RefsAdded != 3 || got.RefsRemoved != 1 || got.Deleted != 2 || !got.CursorChanged {
		t.Errorf("dry run: %+v, want 2 contexts, 3 refs added, 1 removed, 2 sets deleted, a new cursor", got)
	}
	done, err := store.Load(ctx, contexts, opts)
	if err != nil {
		t.Fatal(err)
	}
	predicted.Cursor, done.Cursor = "", ""
	if predicted != done {
		t.Errorf("the dry run said %+v, the load did %+v", predicted, done)
	}
}
