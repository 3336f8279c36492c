package dynamodb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/internal/storetest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
)

// seed writes seed under prefix as the Relay Proxy leaves it: the contexts' items (written
// whole: a patch of hundreds is slow on moto, see dynamotest.Write), the version a patch
// sets, then synchronizedOn.
func seed(t *testing.T, c *awsdynamodb.Client, table, prefix string, s storetest.Seed) {
	t.Helper()
	var changes []dynamotest.Change
	for h, e := range s.Contexts {
		changes = append(changes, dynamotest.Change{Hash: h, AddIncluded: e.Included, AddExcluded: e.Excluded})
	}
	dynamotest.Write(t, c, table, prefix, changes)
	dynamotest.Patch(t, c, table, prefix, "", s.Cursor, nil)
	if !s.SynchronizedOn.IsZero() {
		dynamotest.SetSynchronizedOn(t, c, table, prefix, s.SynchronizedOn.UnixMilli())
	}
}

// prefix is a prefix no other test uses.
func prefix(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "bigsegtest-" + hex.EncodeToString(b[:])
}

// moto is a client of the package's moto_server and a table of the test's own.
func moto(t *testing.T) (*awsdynamodb.Client, string) {
	c := dynamotest.Client(t, dynamotest.Shared(t).URL)
	return c, dynamotest.Table(t, c)
}

// The contract, under a prefix and under none (LaunchDarkly's default): each case in a
// table of its own, for the empty prefix.
func TestContract(t *testing.T) {
	t.Run("prefix", func(t *testing.T) {
		c, table := moto(t)
		storetest.Run(t, func(t *testing.T, s storetest.Seed) segments.Store {
			p := prefix(t)
			seed(t, c, table, p, s)
			return dynamodb.New(c, table, p)
		})
	})
	t.Run("no prefix", func(t *testing.T) {
		c := dynamotest.Client(t, dynamotest.Shared(t).URL)
		storetest.Run(t, func(t *testing.T, s storetest.Seed) segments.Store {
			table := dynamotest.Table(t, c)
			seed(t, c, table, "", s)
			return dynamodb.New(c, table, dynamodb.DefaultPrefix)
		})
	})
}

func TestLayout(t *testing.T) {
	tests := []struct{ prefix, users, meta string }{
		{"", "big_segments_user", "big_segments_metadata"},
		{"env1", "env1:big_segments_user", "env1:big_segments_metadata"},
	}
	for _, tt := range tests {
		s := dynamodb.New(nil, "t", tt.prefix)
		if s.UserNamespace() != tt.users || s.MetadataKey() != tt.meta {
			t.Errorf("prefix %q: %q, %q; want %q, %q", tt.prefix, s.UserNamespace(), s.MetadataKey(), tt.users, tt.meta)
		}
	}
}

// A prefix and no prefix are different data in one table.
func TestPrefixesAreSeparate(t *testing.T) {
	c, table := moto(t)
	alice := segments.Hash("alice")
	dynamotest.Patch(t, c, table, "", "", "v-none", []dynamotest.Change{{Hash: alice, AddIncluded: []string{"none.g1"}}})
	dynamotest.Patch(t, c, table, "env1", "", "v-env1", []dynamotest.Change{{Hash: alice, AddIncluded: []string{"env1.g1"}}})
	for _, tt := range []struct{ prefix, ref, cursor string }{{"", "none.g1", "v-none"}, {"env1", "env1.g1", "v-env1"}, {"env2", "", ""}} {
		s := dynamodb.New(c, table, tt.prefix)
		r := s.Memberships(context.Background(), []string{alice})[0]
		want := map[string]bool{}
		if tt.ref != "" {
			want[tt.ref] = true
		}
		if diff := cmp.Diff(want, storetest.Map(r.Membership)); r.Err != nil || diff != "" {
			t.Errorf("prefix %q: %v, (-want +got):\n%s", tt.prefix, r.Err, diff)
		}
		if md, err := s.Metadata(context.Background()); err != nil || md.Cursor != tt.cursor {
			t.Errorf("prefix %q: cursor %q, %v; want %q", tt.prefix, md.Cursor, err, tt.cursor)
		}
	}
}

// The Relay Proxy's patches, more than one transaction long, and their removals, are read
// as they are applied; every patch moves the cursor.
func TestRelayPatches(t *testing.T) {
	c, table := moto(t)
	s := dynamodb.New(c, table, "")
	var changes []dynamotest.Change
	hashes := make([]string, 60)
	for i := range hashes {
		hashes[i] = segments.Hash("user-" + strconv.Itoa(i))
		changes = append(changes, dynamotest.Change{Hash: hashes[i], AddIncluded: []string{"a.g1"}, AddExcluded: []string{"b.g1"}})
	}
	dynamotest.Patch(t, c, table, "", "", "v1", changes)
	dynamotest.Patch(t, c, table, "", "v1", "v2", []dynamotest.Change{
		{Hash: hashes[0], RemoveIncluded: []string{"a.g1"}, RemoveExcluded: []string{"b.g1"}},
		{Hash: hashes[1], RemoveExcluded: []string{"b.g1"}, AddIncluded: []string{"c.g1"}},
	})
	reads := s.Memberships(context.Background(), hashes)
	for i, r := range reads {
		want := map[string]bool{"a.g1": true, "b.g1": false}
		switch i {
		case 0:
			want = map[string]bool{} // an item with both sets emptied: no membership
		case 1:
			want = map[string]bool{"a.g1": true, "c.g1": true}
		}
		if diff := cmp.Diff(want, storetest.Map(r.Membership)); r.Err != nil || diff != "" {
			t.Errorf("context %d: %v, (-want +got):\n%s", i, r.Err, diff)
		}
	}
	if md, err := s.Metadata(context.Background()); err != nil || md.Cursor != "v2" {
		t.Errorf("cursor %q, %v; want v2", md.Cursor, err)
	}
}

// More contexts than one BatchGetItem takes are read in several, each of at most 100 keys.
func TestMembershipsSplitsLargeBatches(t *testing.T) {
	c, table := moto(t)
	hashes := make([]string, 250)
	var changes []dynamotest.Change
	for i := range hashes {
		hashes[i] = segments.Hash("user-" + strconv.Itoa(i))
		if i%2 == 0 {
			changes = append(changes, dynamotest.Change{Hash: hashes[i], AddIncluded: []string{"even.g" + strconv.Itoa(i)}})
		}
	}
	hashes = append(hashes, hashes[10], hashes[11]) // asked for twice: read once
	dynamotest.Patch(t, c, table, "", "", "v1", changes)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	s := dynamodb.New(dynamotest.Client(t, proxy.URL), table, "")
	reads := s.Memberships(context.Background(), hashes)
	if len(reads) != len(hashes) {
		t.Fatalf("%d reads for %d hashes", len(reads), len(hashes))
	}
	for i, r := range reads {
		n := i
		if i >= 250 {
			n = i - 240
		}
		want := map[string]bool{}
		if n%2 == 0 {
			want["even.g"+strconv.Itoa(n)] = true
		}
		if diff := cmp.Diff(want, storetest.Map(r.Membership)); r.Err != nil || diff != "" {
			t.Errorf("context %d: %v, (-want +got):\n%s", i, r.Err, diff)
		}
	}
	if n := proxy.Calls("BatchGetItem"); n != 3 {
		t.Errorf("250 contexts took %d BatchGetItem calls, want 3", n)
	}
}

// Keys that DynamoDB leaves unprocessed are asked for again, and read.
func TestUnprocessedKeysAreReadAgain(t *testing.T) {
	c, table := moto(t)
	hashes := make([]string, 40)
	var changes []dynamotest.Change
	for i := range hashes {
		hashes[i] = segments.Hash("user-" + strconv.Itoa(i))
		changes = append(changes, dynamotest.Change{Hash: hashes[i], AddIncluded: []string{"a.g1"}})
	}
	dynamotest.Patch(t, c, table, "", "", "v1", changes)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	proxy.On("BatchGetItem", func(n int, forward func() dynamotest.Reply) dynamotest.Reply {
		if n <= 2 {
			return dynamotest.Unprocess(forward(), 15) // 40 -> 25 -> 10 -> all
		}
		return forward()
	})
	s := dynamodb.New(dynamotest.Client(t, proxy.URL), table, "")
	for i, r := range s.Memberships(context.Background(), hashes) {
		if inc, ok := storetest.Map(r.Membership)["a.g1"]; r.Err != nil || !ok || !inc {
			t.Errorf("context %d: %v, %v; want included in a.g1", i, storetest.Map(r.Membership), r.Err)
		}
	}
	if n := proxy.Calls("BatchGetItem"); n != 3 {
		t.Errorf("%d BatchGetItem calls, want 3", n)
	}
}

// Values of the wrong type fail their context (or the status poll), never read as nothing;
// other contexts of the same read are answered.
func TestWrongTypes(t *testing.T) {
	c, table := moto(t)
	s := dynamodb.New(c, table, "")
	user := func(name string, attrs map[string]types.AttributeValue) string {
		h := segments.Hash(name)
		item := dynamotest.Key(s.UserNamespace(), h)
		for k, v := range attrs {
			item[k] = v
		}
		dynamotest.Put(t, c, table, item)
		return h
	}
	good := user("good", map[string]types.AttributeValue{"included": &types.AttributeValueMemberSS{Value: []string{"a.g1"}}})
	tests := []struct {
		name, hash, says string
	}{
		{"included as a list", user("list", map[string]types.AttributeValue{"included": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a.g1"}}}}), "included is a list (L)"},
		{"included as a string", user("string", map[string]types.AttributeValue{"included": &types.AttributeValueMemberS{Value: "a.g1"}}), "included is a string (S)"},
		{"excluded as a number set", user("ns", map[string]types.AttributeValue{"excluded": &types.AttributeValueMemberNS{Value: []string{"1"}}}), "excluded is a number set (NS)"},
		{"excluded as null", user("null", map[string]types.AttributeValue{"excluded": &types.AttributeValueMemberNULL{Value: true}}), "excluded is null (NULL)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reads := s.Memberships(context.Background(), []string{tt.hash, good})
			if err := reads[0].Err; !errors.Is(err, segments.ErrInvalidData) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("err = %v; want ErrInvalidData saying %q", err, tt.says)
			}
			if reads[1].Err != nil || reads[1].Membership.Len() != 1 {
				t.Errorf("the good context of the same read: %v, %v", storetest.Map(reads[1].Membership), reads[1].Err)
			}
		})
	}
}

func TestMetadataValues(t *testing.T) {
	c, table := moto(t)
	s := dynamodb.New(c, table, "")
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	max := strconv.FormatInt(segments.MaxSynchronizedOnMillis, 10)
	tests := []struct {
		name           string
		synced, cursor types.AttributeValue // nil: absent
		wantMs         int64
		wantCursor     string
		invalid        string // what the error says, "" for none
	}{
		{name: "no item", wantMs: 0},
		{name: "both", synced: n("1764430000000"), cursor: str("v1"), wantMs: 1764430000000, wantCursor: "v1"},
		{name: "0 is never", synced: n("0"), wantMs: 0},
		{name: "the end of year 9999", synced: n(max), wantMs: segments.MaxSynchronizedOnMillis},
		{name: "a cursor of MaxCursorBytes", synced: n("1"), cursor: str(strings.Repeat("c", segments.MaxCursorBytes)), wantMs: 1, wantCursor: strings.Repeat("c", segments.MaxCursorBytes)},
		{name: "synchronizedOn as a string", synced: str("1764430000000"), invalid: "synchronizedOn is a string (S), not a number (N)"},
		{name: "synchronizedOn fractional", synced: n("1764430000000.5"), invalid: "not unix milliseconds"},
		{name: "synchronizedOn negative", synced: n("-1"), invalid: "not unix milliseconds"},
		{name: "synchronizedOn after year 9999", synced: n(strconv.FormatInt(segments.MaxSynchronizedOnMillis+1, 10)), invalid: "not unix milliseconds"},
		{name: "synchronizedOn beyond int64", synced: n("99999999999999999999999"), invalid: "not unix milliseconds"},
		{name: "lastVersion as a number", synced: n("1"), cursor: n("7"), invalid: "lastVersion is a number (N), not a string (S)"},
		{name: "lastVersion too long", synced: n("1"), cursor: str(strings.Repeat("c", segments.MaxCursorBytes+1)), invalid: "lastVersion holds 1025 bytes, more than 1024"},
		{name: "lastVersion as a string set", cursor: &types.AttributeValueMemberSS{Value: []string{"v1"}}, invalid: "lastVersion is a string set (SS)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := dynamotest.Key(s.MetadataKey(), s.MetadataKey())
			if _, err := c.DeleteItem(context.Background(), &awsdynamodb.DeleteItemInput{TableName: &table, Key: key}); err != nil {
				t.Fatal(err)
			}
			if tt.synced != nil || tt.cursor != nil {
				item := dynamotest.Key(s.MetadataKey(), s.MetadataKey())
				if tt.synced != nil {
					item["synchronizedOn"] = tt.synced
				}
				if tt.cursor != nil {
					item["lastVersion"] = tt.cursor
				}
				dynamotest.Put(t, c, table, item)
			}
			md, err := s.Metadata(context.Background())
			if tt.invalid != "" {
				if !errors.Is(err, segments.ErrInvalidMetadata) || !strings.Contains(err.Error(), tt.invalid) {
					t.Errorf("err = %.200v; want ErrInvalidMetadata saying %q", err, tt.invalid)
				}
				if err != nil && strings.Contains(err.Error(), "cccccccccc") {
					t.Errorf("the error quotes the value: %.200v", err)
				}
				return
			}
			gotMs := int64(0)
			if !md.LastSynchronized.IsZero() {
				gotMs = md.LastSynchronized.UnixMilli()
			}
			if err != nil || gotMs != tt.wantMs || md.Cursor != tt.wantCursor {
				t.Errorf("Metadata = %d ms, cursor of %d bytes, %v; want %d, %d bytes", gotMs, len(md.Cursor), err, tt.wantMs, len(tt.wantCursor))
			}
		})
	}
}

// The metadata of three environments of one table, and of one in another table, in one
// BatchGetItem; one environment's invalid metadata fails that environment only.
func TestMetadatasOfEnvironments(t *testing.T) {
	c, table := moto(t)
	other := dynamotest.Table(t, c)
	base := prefix(t)
	stores := dynamodb.NewStores(c, table, []string{base + "-prod", base + "-staging", base + "-qa"})
	stores = append(stores, dynamodb.New(c, other, base+"-prod"))
	for i, s := range []*dynamodb.Store{stores[0], stores[1], stores[3]} {
		dynamotest.Patch(t, c, s.Table(), s.Prefix(), "", "c"+strconv.Itoa(i), nil)
		dynamotest.SetSynchronizedOn(t, c, s.Table(), s.Prefix(), 1764430000000+int64(i))
	}
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	stores = dynamodb.NewStores(dynamotest.Client(t, proxy.URL), table, []string{base + "-prod", base + "-staging", base + "-qa"})
	stores = append(stores, dynamodb.New(dynamotest.Client(t, proxy.URL), other, base+"-prod"))
	reads := dynamodb.Metadatas(context.Background(), stores...)
	if n := proxy.Calls("BatchGetItem"); n != 1 {
		t.Errorf("the metadata of four environments took %d calls, want 1", n)
	}
	want := []segments.Metadata{
		{Cursor: "c0"}, {Cursor: "c1"}, {}, {Cursor: "c2"},
	}
	for i, r := range reads {
		gotMs, wantMs := int64(0), int64(0)
		if !r.Metadata.LastSynchronized.IsZero() {
			gotMs = r.Metadata.LastSynchronized.UnixMilli()
		}
		if want[i].Cursor != "" {
			wantMs = 1764430000000 + int64(i) - int64(i/3)
		}
		if r.Err != nil || r.Metadata.Cursor != want[i].Cursor || gotMs != wantMs {
			t.Errorf("store %d: %+v, %v; want cursor %q at %d", i, r.Metadata, r.Err, want[i].Cursor, wantMs)
		}
	}
	item := dynamotest.Key(stores[1].MetadataKey(), stores[1].MetadataKey())
	item["synchronizedOn"] = &types.AttributeValueMemberS{Value: "soon"}
	dynamotest.Put(t, c, table, item)
	reads = dynamodb.Metadatas(context.Background(), stores...)
	if reads[0].Err != nil || !errors.Is(reads[1].Err, segments.ErrInvalidMetadata) || reads[2].Err != nil || reads[3].Err != nil {
		t.Errorf("with staging's synchronizedOn invalid: %v, %v, %v, %v", reads[0].Err, reads[1].Err, reads[2].Err, reads[3].Err)
	}
}
