// Package dynamodb is the segments.Store of DynamoDB data written in the LaunchDarkly Big
// Segments layout (by the Relay Proxy, an SDK's synchronizer, or Load), on the AWS SDK for Go
// v2. Nothing of the SDK is seen above it but the client that NewClient makes, which only
// main holds.
//
// # Layout
//
// One table, with partition key "namespace" and sort key "key", both strings. A context is the
// item of namespace "{prefix}:big_segments_user" and key its hash, with the string sets
// "included" and "excluded" of segment refs; no item, or an item with neither set, is no
// membership. The metadata is the item whose namespace and key are both
// "{prefix}:big_segments_metadata": "synchronizedOn" (a number, unix milliseconds) and
// "lastVersion" (a string, the Relay Proxy's version of the data, which it sets after every
// patch it applies), read as segments.Metadata's LastSynchronized and Cursor. With an empty
// prefix, LaunchDarkly's default for DynamoDB, the namespaces are "big_segments_user" and
// "big_segments_metadata".
//
// # Reads
//
// Every read is a BatchGetItem of at most 100 keys (larger reads are split, and the parts
// sent concurrently), strongly consistent unless WithConsistentRead(false). Keys that
// DynamoDB leaves unprocessed (throttling, a response over 16 MB) are asked for again after a
// short backoff, until ctx ends: a key still unprocessed then fails its context with
// ErrUnprocessed. It is never read as "no membership". A failed call fails the contexts it
// was reading, and no others. Data of the wrong type (a set that is not a string set, a
// synchronizedOn that is not a number of unix milliseconds up to year 9999, a lastVersion
// that is not a string of at most segments.MaxCursorBytes) fails its context with
// segments.ErrInvalidData, or the status poll with segments.ErrInvalidMetadata. An answer is
// checked against its checksum (X-Amz-Crc32) before it is decoded, and must name the table
// under Responses with a list (DynamoDB names it, with [] when no item was found) unless
// every key of it is unprocessed: an answer that fails either says nothing of the keys, and
// fails their reads with segments.ErrInvalidData, never "no item". So must Load's: a Query
// answer without Items, or with an item that is not a context's of the prefix, fails the
// load before it deletes anything, and a BatchWriteItem answer without UnprocessedItems
// fails it too.
//
// # Observation
//
// An Observer (ClientOptions.Observer, WithObserver) is told of every request the client
// sends, each attempt of a retried call apart, by operation and ErrorCode, of the read
// capacity the answers say was consumed (reads ask for it: ReturnConsumedCapacity TOTAL), and
// of the unprocessed keys asked for again. Its labels come from fixed sets (Operations,
// ErrorCodes); main counts them in Prometheus, which this package does not import.
package dynamodb

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/bigseg/bigseg/segments"
)

// DefaultPrefix is the prefix LaunchDarkly's synchronizers use with DynamoDB unless
// configured otherwise: none.
const DefaultPrefix = ""

// Attribute names of LaunchDarkly's layout.
const (
	attrNamespace      = "namespace"
	attrKey            = "key"
	attrIncluded       = "included"
	attrExcluded       = "excluded"
	attrSynchronizedOn = "synchronizedOn"
	attrLastVersion    = "lastVersion"
)

// API is the part of the SDK's *dynamodb.Client that this package calls, so that a test can
// put a fake in its place. Reads need only BatchGetItem; Load needs the others but GetItem and
// PutItem; Scan needs Query.
type API interface {
	BatchGetItem(ctx context.Context, in *awsdynamodb.BatchGetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.BatchGetItemOutput, error)
	UpdateItem(ctx context.Context, in *awsdynamodb.UpdateItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *awsdynamodb.QueryInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.QueryOutput, error)
	BatchWriteItem(ctx context.Context, in *awsdynamodb.BatchWriteItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.BatchWriteItemOutput, error)
	// The inventory's lease and result (lease.go).
	GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *awsdynamodb.PutItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *awsdynamodb.DeleteItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.DeleteItemOutput, error)
}

// Store reads Big Segments from one DynamoDB table under one prefix. It does not own the
// client.
type Store struct {
	client     API
	table      string
	prefix     string
	userNS     string // the namespace of contexts' items
	metaKey    string // the namespace and key of the metadata item
	consistent bool
	observer   Observer      // told of unprocessed keys asked for again; nil for none
	readUnits  atomic.Uint64 // the read units scans consumed, as float64 bits (scan.go)
}

var _ segments.Store = (*Store)(nil)

// Option tunes a Store.
type Option func(*Store)

// WithConsistentRead says whether reads are strongly consistent (the default: a read sees
// every write the synchronizer finished before it) or eventually consistent (half the read
// capacity, but an answer may miss writes of the last second or so, after the cursor that
// announced them was seen).
func WithConsistentRead(on bool) Option { return func(s *Store) { s.consistent = on } }

// New returns a store reading table under prefix (DefaultPrefix, "", for none).
func New(client API, table, prefix string, opts ...Option) *Store {
	return NewStores(client, table, []string{prefix}, opts...)[0]
}

// NewStores returns a store for each prefix (the environments of one table, as the Relay
// Proxy writes them), on one client; see Metadatas.
func NewStores(client API, table string, prefixes []string, opts ...Option) []*Store {
	stores := make([]*Store, len(prefixes))
	for i, prefix := range prefixes {
		s := &Store{client: client, table: table, prefix: prefix, consistent: true,
			userNS: namespace(prefix, "big_segments_user"), metaKey: namespace(prefix, "big_segments_metadata")}
		for _, o := range opts {
			o(s)
		}
		stores[i] = s
	}
	return stores
}

// namespace is base under prefix, as LaunchDarkly's stores name it.
func namespace(prefix, base string) string {
	if prefix == "" {
		return base
	}
	return prefix + ":" + base
}

// Table is the table the store reads.
func (s *Store) Table() string { return s.table }

// Prefix is the store's prefix, "" for none.
func (s *Store) Prefix() string { return s.prefix }

// UserNamespace is the namespace of the items of contexts.
func (s *Store) UserNamespace() string { return s.userNS }

// MetadataKey is the namespace, and the key, of the metadata item.
func (s *Store) MetadataKey() string { return s.metaKey }

// membershipProjection reads an item's keys (to match it to its request) and sets only.
var membershipProjection = projection{expr: "#n, #k, #i, #e",
	names: map[string]string{"#n": attrNamespace, "#k": attrKey, "#i": attrIncluded, "#e": attrExcluded}}

// metadataProjection reads the metadata item's keys and values only.
var metadataProjection = projection{expr: "#n, #k, #s, #v",
	names: map[string]string{"#n": attrNamespace, "#k": attrKey, "#s": attrSynchronizedOn, "#v": attrLastVersion}}

// Memberships implements segments.Store with BatchGetItem: one call for up to 100 contexts,
// more sent concurrently (a context asked for twice is read once). A failed call, or a key
// still unprocessed when ctx ends, fails the contexts it was for; an item whose sets are not
// string sets fails its context with segments.ErrInvalidData.
func (s *Store) Memberships(ctx context.Context, hashes []string) []segments.Read {
	reads := make([]segments.Read, len(hashes))
	if len(hashes) == 0 {
		return reads
	}
	keys := make([]itemKey, len(hashes))
	for i, h := range hashes {
		keys[i] = itemKey{table: s.table, namespace: s.userNS, key: h}
	}
	got := batchGet(ctx, s.client, s.consistent, s.observer, membershipProjection, keys)
	for i, k := range keys {
		g := got[k]
		if g.err != nil {
			reads[i].Err = g.err // segments says "read membership"
			continue
		}
		reads[i].Membership, reads[i].Err = parseMembership(g.attrs)
	}
	return reads
}

// parseMembership is the membership of a context's item, nil for none.
func parseMembership(attrs map[string]types.AttributeValue) (segments.Membership, error) {
	inc, err := stringSet(attrs, attrIncluded)
	if err != nil {
		return segments.Membership{}, err
	}
	exc, err := stringSet(attrs, attrExcluded)
	if err != nil {
		return segments.Membership{}, err
	}
	return segments.NewMembership(inc, exc), nil
}

// stringSet is the string set attrs hold under name, nil when they have none.
func stringSet(attrs map[string]types.AttributeValue, name string) ([]string, error) {
	v, ok := attrs[name]
	if !ok {
		return nil, nil
	}
	ss, ok := v.(*types.AttributeValueMemberSS)
	if !ok {
		return nil, fmt.Errorf("%w: %s is %s, not a string set (SS)", segments.ErrInvalidData, name, typeName(v))
	}
	return ss.Value, nil
}

// Metadata implements segments.Store with one BatchGetItem of the metadata item. No item, or
// no synchronizedOn, or 0, means never synchronized; no lastVersion means no cursor.
func (s *Store) Metadata(ctx context.Context) (segments.Metadata, error) {
	r := Metadatas(ctx, s)[0]
	return r.Metadata, r.Err
}

// Metadatas reads the metadata of every store (all on one client: the environments of one
// table, or of several tables of one account and region) in one BatchGetItem. Each read is as
// Metadata's; one environment's invalid metadata fails that environment only.
func Metadatas(ctx context.Context, stores ...*Store) []segments.MetadataRead {
	reads := make([]segments.MetadataRead, len(stores))
	if len(stores) == 0 {
		return reads
	}
	keys := make([]itemKey, len(stores))
	for i, s := range stores {
		keys[i] = itemKey{table: s.table, namespace: s.metaKey, key: s.metaKey}
	}
	got := batchGet(ctx, stores[0].client, stores[0].consistent, stores[0].observer, metadataProjection, keys)
	for i, k := range keys {
		g := got[k]
		if g.err != nil {
			reads[i].Err = fmt.Errorf("read metadata %s: %w", k.key, g.err)
			continue
		}
		reads[i].Metadata, reads[i].Err = parseMetadata(k.key, g.attrs)
	}
	return reads
}

// StatusTimeout bounds a status poll's read of the metadata (Status), as Redis's read timeout
// bounds Redis's: a hung read makes the store unavailable after about a second.
const StatusTimeout = time.Second

// Status is what a status poll reads: Metadatas, within StatusTimeout at most.
func Status(ctx context.Context, stores ...*Store) []segments.MetadataRead {
	ctx, cancel := context.WithTimeout(ctx, StatusTimeout)
	defer cancel()
	return Metadatas(ctx, stores...)
}

// parseMetadata is the metadata that the metadata item's attrs hold (nil for no item).
func parseMetadata(key string, attrs map[string]types.AttributeValue) (segments.Metadata, error) {
	var md segments.Metadata
	if v, ok := attrs[attrLastVersion]; ok {
		s, ok := v.(*types.AttributeValueMemberS)
		switch {
		case !ok:
			return md, fmt.Errorf("%w: %s: %s is %s, not a string (S)", segments.ErrInvalidMetadata, key, attrLastVersion, typeName(v))
		case len(s.Value) > segments.MaxCursorBytes:
			return md, fmt.Errorf("%w: %s: %s holds %d bytes, more than %d", segments.ErrInvalidMetadata, key, attrLastVersion, len(s.Value), segments.MaxCursorBytes)
		}
		md.Cursor = s.Value
	}
	v, ok := attrs[attrSynchronizedOn]
	if !ok {
		return md, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return md, fmt.Errorf("%w: %s: %s is %s, not a number (N)", segments.ErrInvalidMetadata, key, attrSynchronizedOn, typeName(v))
	}
	ms, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil || ms < 0 || ms > segments.MaxSynchronizedOnMillis {
		return md, fmt.Errorf("%w: %s: %s holds %.40q, not unix milliseconds up to year 9999", segments.ErrInvalidMetadata, key, attrSynchronizedOn, n.Value)
	}
	if ms > 0 {
		md.LastSynchronized = time.UnixMilli(ms)
	}
	return md, nil
}

// typeName names the DynamoDB type of v, for errors.
func typeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "a string (S)"
	case *types.AttributeValueMemberN:
		return "a number (N)"
	case *types.AttributeValueMemberB:
		return "binary (B)"
	case *types.AttributeValueMemberSS:
		return "a string set (SS)"
	case *types.AttributeValueMemberNS:
		return "a number set (NS)"
	case *types.AttributeValueMemberBS:
		return "a binary set (BS)"
	case *types.AttributeValueMemberL:
		return "a list (L)"
	case *types.AttributeValueMemberM:
		return "a map (M)"
	case *types.AttributeValueMemberBOOL:
		return "a boolean (BOOL)"
	case *types.AttributeValueMemberNULL:
		return "null (NULL)"
	}
	return "of an unknown type"
}
