package dynamodb_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/internal/storetest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/fixture"
)

// readAll reads the memberships of the given keys back through the store.
func readAll(t *testing.T, store *dynamodb.Store, keys []string) map[string]map[string]bool {
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

func ctxOf(key string, inc, exc []string) fixture.Context {
	return fixture.Context{Hash: segments.Hash(key), Included: inc, Excluded: exc}
}

// metadataItem is the stored metadata item's synchronizedOn and lastVersion ("" when absent).
func metadataItem(t *testing.T, c *awsdynamodb.Client, table string, s *dynamodb.Store) (synced, cursor string) {
	item := dynamotest.Item(t, c, table, dynamotest.Key(s.MetadataKey(), s.MetadataKey()))
	if v, ok := item["synchronizedOn"].(*types.AttributeValueMemberN); ok {
		synced = v.Value
	}
	if v, ok := item["lastVersion"].(*types.AttributeValueMemberS); ok {
		cursor = v.Value
	}
	return synced, cursor
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	c, table := moto(t)
	p := prefix(t)
	store := dynamodb.New(c, table, p)
	other := dynamodb.New(c, table, p+"-other") // another environment of the table
	dynamotest.Patch(t, c, table, p+"-other", "", "", []dynamotest.Change{{Hash: segments.Hash("bystander"), AddIncluded: []string{"keep.g1"}}})

	synced := time.UnixMilli(1764430000000)
	first := []fixture.Context{
		ctxOf("alice", []string{"a.g1", "b.g1", "a.g1"}, []string{"c.g1"}), // a ref given twice is one
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
	if md, err := store.Metadata(ctx); err != nil || !md.LastSynchronized.Equal(synced) || md.Cursor != st.Cursor || !strings.HasPrefix(md.Cursor, "load-") {
		t.Errorf("metadata: %+v, %v; want %v and the load's cursor %q", md, err, synced, st.Cursor)
	}

	// Idempotent.
	if st, err := store.Load(ctx, first, fixture.LoadOptions{SynchronizedOn: synced}); err != nil || st.Changed() || st.CursorChanged {
		t.Errorf("second load: %+v, %v; want nothing changed", st, err)
	}

	// Without Replace, a load only adds.
	second := []fixture.Context{ctxOf("alice", []string{"a.g1"}, nil), ctxOf("dave", []string{"d.g1"}, nil)}
	if _, err := store.Load(ctx, second, fixture.LoadOptions{SynchronizedOn: synced}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, store, []string{"alice", "bob"}); len(got["alice"]) != 3 || len(got["bob"]) != 1 {
		t.Errorf("add-only load removed something: %v", got)
	}

	// With Replace, the table matches the file, under the prefix only.
	// An item the Relay Proxy emptied is deleted too, but changes no membership.
	_, cur := metadataItem(t, c, table, store)
	dynamotest.Patch(t, c, table, p, cur, cur+"+1", []dynamotest.Change{{Hash: segments.Hash("emptied"), AddIncluded: []string{"x.g1"}}})
	dynamotest.Patch(t, c, table, p, cur+"+1", cur+"+2", []dynamotest.Change{{Hash: segments.Hash("emptied"), RemoveIncluded: []string{"x.g1"}}})
	st, err = store.Load(ctx, second, fixture.LoadOptions{SynchronizedOn: synced.Add(time.Hour), Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.RefsRemoved != 2 || st.Deleted != 2 || st.EmptyDeleted != 1 { // alice's b.g1 and c.g1; bob's and carol's items; emptied's
		t.Errorf("replace: %+v, want 2 refs removed, 2 items deleted and 1 empty one", st)
	}
	want = map[string]map[string]bool{
		"alice": {"a.g1": true}, "bob": {}, "carol": {}, "dave": {"d.g1": true},
	}
	if diff := cmp.Diff(want, readAll(t, store, []string{"alice", "bob", "carol", "dave"})); diff != "" {
		t.Errorf("after replace (-want +got):\n%s", diff)
	}
	if got := readAll(t, other, []string{"bystander"}); len(got["bystander"]) != 1 {
		t.Error("replace deleted an item of another prefix")
	}
	if s, v := metadataItem(t, c, table, store); s != strconv.FormatInt(synced.Add(time.Hour).UnixMilli(), 10) || v != st.Cursor || !st.CursorChanged {
		t.Errorf("synchronizedOn %s, lastVersion %q; stats say %q (changed %v)", s, v, st.Cursor, st.CursorChanged)
	}
}

// A load with Replace overwrites sets of the wrong type; one without it refuses to add to
// them.
func TestLoadOverWrongTypes(t *testing.T) {
	ctx := context.Background()
	c, table := moto(t)
	store := dynamodb.New(c, table, "")
	item := dynamotest.Key(store.UserNamespace(), segments.Hash("alice"))
	item["included"] = &types.AttributeValueMemberS{Value: "a.g1"}
	dynamotest.Put(t, c, table, item)
	alice := []fixture.Context{ctxOf("alice", []string{"a.g1"}, nil)}
	if _, err := store.Load(ctx, alice, fixture.LoadOptions{}); err == nil || !strings.Contains(err.Error(), "Replace") {
		t.Errorf("add-only load over a string: %v, want an error", err)
	}
	if _, err := store.Load(ctx, alice, fixture.LoadOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, store, []string{"alice"}); !got["alice"]["a.g1"] {
		t.Errorf("after replace: %v", got)
	}
}

// A new cursor empties the cache of every running instance, so a load writes one only when
// it changed something, or when the file gives a cursor other than the stored one.
// synchronizedOn is written by every load.
func TestLoadCursor(t *testing.T) {
	ctx := context.Background()
	c, table := moto(t)
	store := dynamodb.New(c, table, prefix(t))
	metaKey := dynamotest.Key(store.MetadataKey(), store.MetadataKey())
	setCursor := func(v types.AttributeValue) {
		item := dynamotest.Item(t, c, table, metaKey)
		item["lastVersion"] = v
		dynamotest.Put(t, c, table, item)
	}
	alice := func(refs ...string) fixture.Context { return ctxOf("alice", refs, nil) }
	bob := ctxOf("bob", nil, []string{"b.g1"})
	const (
		unchanged = "(unchanged)" // the cursor stored before the load
		made      = "(new)"       // a new load-... cursor
		none      = "(none)"      // no lastVersion at all
	)
	steps := []struct {
		name     string
		before   func()
		contexts []fixture.Context
		opts     fixture.LoadOptions
		want     string
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
			before:   func() { setCursor(&types.AttributeValueMemberS{Value: strings.Repeat("c", segments.MaxCursorBytes+1)}) },
			contexts: []fixture.Context{alice("a.g1")}, want: made},
		{name: "a stored cursor of the wrong type is replaced",
			before:   func() { setCursor(&types.AttributeValueMemberN{Value: "7"}) },
			contexts: []fixture.Context{alice("a.g1")}, want: made},
		{name: "no cursor stored, nothing changed: still none",
			before: func() {
				item := dynamotest.Item(t, c, table, metaKey)
				delete(item, "lastVersion")
				dynamotest.Put(t, c, table, item)
			},
			contexts: []fixture.Context{alice("a.g1")}, want: none},
	}
	for i, step := range steps {
		if step.before != nil {
			step.before()
		}
		_, before := metadataItem(t, c, table, store)
		step.opts.SynchronizedOn = time.UnixMilli(1764430000000 + int64(i))
		st, err := store.Load(ctx, step.contexts, step.opts)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		synced, after := metadataItem(t, c, table, store)
		if after == "" {
			after = none
		}
		switch want := step.want; {
		case want == none && after != none, want == unchanged && after != before,
			want == made && (after == before || !strings.HasPrefix(after, "load-")),
			!strings.HasPrefix(want, "(") && after != want:
			t.Errorf("%s: cursor %.40q before, %.40q after; want %s", step.name, before, after, want)
		}
		if wantChanged := step.want != unchanged && step.want != none; st.CursorChanged != wantChanged || (after != none && st.Cursor != after) {
			t.Errorf("%s: stats say cursor %q, changed %v; the table has %.40q, want changed %v", step.name, st.Cursor, st.CursorChanged, after, wantChanged)
		}
		if synced != strconv.FormatInt(step.opts.SynchronizedOn.UnixMilli(), 10) {
			t.Errorf("%s: synchronizedOn = %q, want %d", step.name, synced, step.opts.SynchronizedOn.UnixMilli())
		}
	}
}

// Both phases report as they go, with counts that only grow, and end with one Done report.
func TestLoadProgress(t *testing.T) {
	ctx := context.Background()
	c, table := moto(t)
	client, pages := pagedClient(t, 40)
	store := dynamodb.New(client, table, "")
	const listed, unlisted = 200, 120
	contexts := make([]fixture.Context, listed)
	for i := range contexts {
		contexts[i] = ctxOf("user-"+strconv.Itoa(i), []string{"a.g1"}, nil)
	}
	var changes []dynamotest.Change
	for i := range unlisted {
		changes = append(changes, dynamotest.Change{Hash: segments.Hash("gone-" + strconv.Itoa(i)), AddIncluded: []string{"a.g1"}, AddExcluded: []string{"b.g1"}})
	}
	dynamotest.Patch(t, c, table, "", "", "v1", changes)
	var reports []fixture.LoadProgress
	st, err := store.Load(ctx, contexts, fixture.LoadOptions{Replace: true, BatchSize: 50,
		Progress: func(p fixture.LoadProgress) { reports = append(reports, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Contexts != listed || st.Deleted != unlisted {
		t.Fatalf("load: %+v, want %d contexts written, %d items deleted", st, listed, unlisted)
	}
	if n := pages(); n != (listed+unlisted+39)/40 {
		t.Errorf("%d pages queried, want %d of 40 items", n, (listed+unlisted+39)/40)
	}
	byPhase := map[fixture.LoadPhase][]fixture.LoadProgress{}
	for i, p := range reports {
		if i > 0 && p.Phase < reports[i-1].Phase {
			t.Fatalf("report %d: %+v after %+v", i, p, reports[i-1])
		}
		byPhase[p.Phase] = append(byPhase[p.Phase], p)
	}
	writing, deleting := byPhase[fixture.Writing], byPhase[fixture.Deleting]
	if len(writing) != listed/50 || len(deleting) < 3 {
		t.Fatalf("%d reports while writing, want %d; %d while deleting, want a few", len(writing), listed/50, len(deleting))
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
	if w := writing[1]; w.Contexts != 100 || w.RefsAdded != 100 {
		t.Errorf("the 2nd report while writing: %+v, want 100 contexts, 100 refs added", w)
	}
	end := deleting[len(deleting)-1]
	if end.Scanned != listed+unlisted || end.Deleted != unlisted {
		t.Errorf("the last report while deleting: %+v, want %d items scanned, %d deleted", end, listed+unlisted, unlisted)
	}
	midway := false
	for _, p := range deleting {
		midway = midway || (p.Deleted > 0 && p.Deleted < unlisted)
	}
	if !midway {
		t.Error("no report while deleting counts some of the deletions but not all")
	}
}

// A load with Replace deletes only the contexts that an answer of DynamoDB lists: a Query
// answer without Items, or with an item that is not a context's of the prefix, fails the load
// before it deletes anything, and a read of the stored cursor that says nothing fails it
// before it writes the metadata.
func TestLoadReplaceAnswersThatSayNothing(t *testing.T) {
	c, table := moto(t)
	alice, stale := segments.Hash("alice"), segments.Hash("stale")
	item := func(ns, key string) string {
		return `{"Items":[{"namespace":{"S":"` + ns + `"},"key":{"S":"` + key + `"}}],"Count":1,"ScannedCount":1}`
	}
	tests := []struct {
		name, op, body string
		call           int  // the call of op answered with body, 0 for every one
		ok             bool // the load succeeds
	}{
		{"query: {}", "Query", `{}`, 0, false},
		{"query: an empty body", "Query", ``, 0, false},
		{"query: Responses, no Items", "Query", `{"Responses":{}}`, 0, false},
		{"query: null Items", "Query", `{"Items":null,"Count":0,"ScannedCount":0}`, 0, false},
		{"query: an item without its keys", "Query", `{"Items":[{}],"Count":1,"ScannedCount":1}`, 0, false},
		{"query: an item of another namespace", "Query", item("other:big_segments_user", stale), 0, false},
		{"query: no items", "Query", `{"Items":[],"Count":0,"ScannedCount":0}`, 0, true},
		// The deletions are made, but the answer does not say so: the load fails.
		{"batchwriteitem: {}", "BatchWriteItem", `{}`, 0, false},
		{"batchwriteitem: the table with null for its unprocessed items", "BatchWriteItem", `{"UnprocessedItems":{"` + table + `":null}}`, 0, false},
		// The 1st BatchGetItem reads the contexts to write, the 2nd the stored cursor.
		{"stored cursor: the table with null for its items", "BatchGetItem", `{"Responses":{"` + table + `":null},"UnprocessedKeys":{}}`, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := prefix(t)
			dynamotest.Patch(t, c, table, p, "", "v1", []dynamotest.Change{{Hash: stale, AddIncluded: []string{"a.g1"}}})
			proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
			proxy.On(tt.op, func(n int, forward func() dynamotest.Reply) dynamotest.Reply {
				r := forward()
				if tt.call == 0 || n == tt.call {
					r.Body = []byte(tt.body)
				}
				return r
			})
			s := dynamodb.New(newClient(t, proxy.URL), table, p)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := s.Load(ctx, []fixture.Context{{Hash: alice, Included: []string{"a.g1"}}}, fixture.LoadOptions{Replace: true})
			if tt.ok != (err == nil) {
				t.Errorf("load: %+v, %v; want a failed load: %v", st, err, !tt.ok)
			}
			kept := dynamotest.Item(t, c, table, dynamotest.Key(s.UserNamespace(), stale)) != nil
			if tt.op == "Query" && (!kept || st.Deleted+st.EmptyDeleted != 0) {
				t.Errorf("the unlisted context's item kept: %v, stats %+v; want it kept, nothing deleted", kept, st)
			}
			if _, cursor := metadataItem(t, c, table, s); !tt.ok && cursor != "v1" {
				t.Errorf("a failed load wrote the cursor %q", cursor)
			}
		})
	}
}

// pagedClient is a client of moto through a proxy that cuts every Query answer to n items,
// with the LastEvaluatedKey DynamoDB gives at its 1 MB page bound, so that a load sees several
// pages of a small table; pages counts the Query calls.
func pagedClient(t *testing.T, n int) (_ *dynamodb.Client, pages func() int) {
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	proxy.On("Query", func(_ int, forward func() dynamotest.Reply) dynamotest.Reply {
		r := forward()
		var page map[string]any
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Errorf("a Query answer: %v", err)
			return r
		}
		items, _ := page["Items"].([]any)
		if len(items) <= n {
			return r
		}
		last := items[n-1].(map[string]any)
		page["Items"], page["Count"] = items[:n], n
		page["LastEvaluatedKey"] = map[string]any{"namespace": last["namespace"], "key": last["key"]}
		r.Body, _ = json.Marshal(page)
		return r
	})
	return newClient(t, proxy.URL), func() int { return proxy.Calls("Query") }
}

// A dry run counts what the load would add, remove and delete, exactly as the load then does,
// and changes nothing: the items, the cursor and the synchronization time stay as they were.
func TestLoadDryRun(t *testing.T) {
	ctx := context.Background()
	c, table := moto(t)
	p := prefix(t)
	dynamotest.Patch(t, c, table, p, "", "v1", []dynamotest.Change{
		{Hash: segments.Hash("alice"), AddIncluded: []string{"a.g1"}},
		{Hash: segments.Hash("stale"), AddIncluded: []string{"a.g1"}, AddExcluded: []string{"b.g1"}},
	})
	store := dynamodb.New(c, table, p)
	contexts := []fixture.Context{ctxOf("alice", []string{"b.g1", "b.g1"}, nil), ctxOf("bob", []string{"a.g1"}, []string{"c.g1"})}
	before := readAll(t, store, []string{"alice", "bob", "stale"})
	synced, cursor := metadataItem(t, c, table, store)
	opts := fixture.LoadOptions{Replace: true, SynchronizedOn: time.UnixMilli(1764430000000)}
	dry := opts
	dry.DryRun = true
	predicted, err := store.Load(ctx, contexts, dry)
	if err != nil {
		t.Fatal(err)
	}
	if after := readAll(t, store, []string{"alice", "bob", "stale"}); !cmp.Equal(after, before) {
		t.Errorf("a dry run changed the memberships: %s", cmp.Diff(before, after))
	}
	if s, cur := metadataItem(t, c, table, store); s != synced || cur != cursor {
		t.Errorf("a dry run changed the metadata: %s %s, was %s %s", s, cur, synced, cursor)
	}
	want := fixture.LoadStats{Contexts: 2, RefsAdded: 3, RefsRemoved: 1, Deleted: 1}
	if got := predicted; got.Contexts != want.Contexts || got.RefsAdded != want.RefsAdded || got.RefsRemoved != want.RefsRemoved ||
		got.Deleted != want.Deleted || !got.CursorChanged {
		t.Errorf("dry run: %+v, want %+v and a new cursor", got, want)
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
