package dynamodb

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
)

// loadWriters is how many UpdateItem calls a load has in flight at once.
const loadWriters = 8

// Load writes contexts into the table in LaunchDarkly's layout (see fixture.Load).
//
// Each batch is read first (strongly consistent), so that only contexts that change are
// written, each with one UpdateItem: ADD of the refs it lacks, or with Replace, SET of its
// sets as given (REMOVE of a set given empty), so a reader sees a context's old sets or its
// new ones, never a mix. With Replace, the items of unlisted contexts are queried a page at a
// time and deleted with BatchWriteItem. The cursor is written after every context, in one
// UpdateItem with the synchronization time.
func (s *Store) Load(ctx context.Context, contexts []fixture.Context, opts fixture.LoadOptions) (fixture.LoadStats, error) {
	return fixture.Load(ctx, loader{s, opts.DryRun}, contexts, opts)
}

// loader is a Store as fixture.Load writes into it; with dryRun, it only counts.
type loader struct {
	s      *Store
	dryRun bool
}

func (l loader) WriteBatch(ctx context.Context, batch []fixture.Context, replace bool, st *fixture.LoadStats) error {
	return l.s.loadBatch(ctx, batch, replace, l.dryRun, st)
}

func (l loader) DeleteUnlisted(ctx context.Context, listed map[string]struct{}, st *fixture.LoadStats, progress func(scanned int, done bool)) error {
	return l.s.deleteUnlisted(ctx, listed, l.dryRun, st, progress)
}

func (l loader) StoredCursor(ctx context.Context) (*string, error) { return l.s.storedCursor(ctx) }

func (l loader) WriteMetadata(ctx context.Context, syncedOnMsec int64, cursor string, cursorChanged bool) error {
	return l.s.writeMetadata(ctx, syncedOnMsec, cursor, cursorChanged)
}

// write is one context's update, with the refs it adds and removes.
type write struct {
	in             *awsdynamodb.UpdateItemInput
	added, removed int
}

// loadBatch reads the contexts of chunk, then writes those that change (a dry run counts them).
func (s *Store) loadBatch(ctx context.Context, chunk []fixture.Context, replace, dryRun bool, st *fixture.LoadStats) error {
	keys := make([]itemKey, len(chunk))
	for i, c := range chunk {
		keys[i] = itemKey{table: s.table, namespace: s.userNS, key: c.Hash}
	}
	current := batchGet(ctx, s.client, true, s.observer, membershipProjection, keys)
	var writes []write
	for i, c := range chunk {
		g := current[keys[i]]
		if g.err != nil {
			return fmt.Errorf("read current memberships: %w", g.err)
		}
		w, err := s.contextWrite(c, g.attrs, replace)
		if err != nil {
			return err
		}
		switch {
		case w.in != nil && dryRun:
			st.RefsAdded, st.RefsRemoved = st.RefsAdded+w.added, st.RefsRemoved+w.removed
		case w.in != nil:
			writes = append(writes, w)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(loadWriters)
	var mu sync.Mutex
	for _, w := range writes {
		g.Go(func() error {
			if _, err := s.client.UpdateItem(gctx, w.in); err != nil {
				return fmt.Errorf("write memberships: %w", err)
			}
			mu.Lock()
			defer mu.Unlock()
			st.RefsAdded += w.added
			st.RefsRemoved += w.removed
			return nil
		})
	}
	return g.Wait()
}

// contextWrite is the update that makes c's item (of attributes current, nil for none) hold
// c's refs, or no update if it does already.
func (s *Store) contextWrite(c fixture.Context, current map[string]types.AttributeValue, replace bool) (write, error) {
	var w write
	var set, add, remove []string
	names, values := map[string]string{}, map[string]types.AttributeValue{}
	for i, f := range []struct {
		attr string
		want []string
	}{{attrIncluded, c.Included}, {attrExcluded, c.Excluded}} {
		have, err := stringSet(current, f.attr)
		wrongType := err != nil
		if wrongType && !replace {
			return w, fmt.Errorf("context %s (line %d): %w (a load with Replace overwrites it)", c.Hash, c.Line, err)
		}
		want := dedupe(f.want)
		plus, minus := difference(want, have), difference(have, want)
		name, value := "#a"+strconv.Itoa(i), ":v"+strconv.Itoa(i)
		switch {
		case !replace && len(plus) > 0:
			add = append(add, name+" "+value)
			values[value] = &types.AttributeValueMemberSS{Value: plus}
		case replace && len(want) > 0 && (len(plus)+len(minus) > 0 || wrongType):
			set = append(set, name+" = "+value)
			values[value] = &types.AttributeValueMemberSS{Value: want}
		case replace && len(want) == 0 && (len(minus) > 0 || wrongType):
			remove = append(remove, name)
		default:
			continue
		}
		names[name] = f.attr
		w.added += len(plus)
		if replace {
			w.removed += len(minus)
		}
	}
	if len(names) == 0 {
		return w, nil
	}
	expr := ""
	for _, part := range []struct {
		action  string
		clauses []string
	}{{"SET", set}, {"REMOVE", remove}, {"ADD", add}} {
		if len(part.clauses) > 0 {
			expr += part.action + " " + strings.Join(part.clauses, ", ") + " "
		}
	}
	w.in = &awsdynamodb.UpdateItemInput{TableName: &s.table, Key: primaryKey(s.userNS, c.Hash),
		UpdateExpression: aws.String(expr), ExpressionAttributeNames: names}
	if len(values) > 0 {
		w.in.ExpressionAttributeValues = values
	}
	return w, nil
}

// dedupe is refs without repeats (a string set cannot hold one twice), in their order.
func dedupe(refs []string) []string {
	seen := make(map[string]struct{}, len(refs))
	out := refs[:0:0]
	for _, r := range refs {
		if _, ok := seen[r]; !ok {
			seen[r] = struct{}{}
			out = append(out, r)
		}
	}
	return out
}

// difference is the refs of a that b does not list.
func difference(a, b []string) []string {
	var out []string
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}

// maxBatchWriteItems is the most requests of one BatchWriteItem.
const maxBatchWriteItems = 25

// deleteUnlisted deletes the items of every context under the prefix that is not in listed,
// querying them a page at a time, and reports the items queried after each page and each
// BatchWriteItem of deletions, then once more with done once all are deleted. A dry run
// counts them.
func (s *Store) deleteUnlisted(ctx context.Context, listed map[string]struct{}, dryRun bool, st *fixture.LoadStats, report func(scanned int, done bool)) error {
	scanned, in := 0, s.contextsQuery()
	var stale []map[string]types.AttributeValue
	var staleFull int // how many of stale held refs
	flush := func() error {
		if !dryRun {
			if err := s.deleteItems(ctx, stale); err != nil {
				return err
			}
		}
		st.Deleted += staleFull
		st.EmptyDeleted += len(stale) - staleFull
		stale, staleFull = stale[:0], 0
		report(scanned, false)
		return nil
	}
	for {
		// Deleting while querying is safe: a page starts after the last key of the one before.
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return fmt.Errorf("query %s: %w", s.userNS, err)
		}
		// DynamoDB lists the items of every page, [] for none: an answer that does not (an
		// empty one, say) tells nothing of what is stored, and deletes nothing.
		if out.Items == nil {
			return fmt.Errorf("query %s: %w: the answer lists no items", s.userNS, segments.ErrInvalidData)
		}
		for _, item := range out.Items {
			k, ok := keyOf(s.table, item)
			if !ok || k.namespace != s.userNS {
				return fmt.Errorf("query %s: %w: an item of the answer is not a context's of the prefix", s.userNS, segments.ErrInvalidData)
			}
			if _, ok := listed[k.key]; ok {
				continue
			}
			stale = append(stale, primaryKey(k.namespace, k.key))
			if m, err := parseMembership(item); err != nil || m.Len() > 0 {
				staleFull++ // sets of the wrong type are something too
			}
			if len(stale) == maxBatchWriteItems {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		scanned += len(out.Items)
		report(scanned, false)
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if len(stale) > 0 {
		if err := flush(); err != nil {
			return err
		}
	}
	report(scanned, true)
	return nil
}

// contextsQuery is the query of the first page of the items of contexts, with their sets.
func (s *Store) contextsQuery() *awsdynamodb.QueryInput {
	in := &awsdynamodb.QueryInput{
		TableName: &s.table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("#n = :n"),
		ProjectionExpression:      aws.String(membershipProjection.expr),
		ExpressionAttributeNames:  membershipProjection.names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberS{Value: s.userNS}},
	}
	return in
}

// deleteItems deletes the items of keys (at most 25) in one BatchWriteItem, and asks again
// for those left unprocessed, as reads do.
func (s *Store) deleteItems(ctx context.Context, keys []map[string]types.AttributeValue) error {
	reqs := make([]types.WriteRequest, len(keys))
	for i, k := range keys {
		reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}}
	}
	for round := 0; len(reqs) > 0; round++ {
		out, err := s.client.BatchWriteItem(ctx, &awsdynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{s.table: reqs}})
		if err != nil {
			return fmt.Errorf("delete items of unlisted contexts: %w", err)
		}
		// DynamoDB lists the unprocessed items of every call, {} for none: an answer that does
		// not (an empty one, say) tells nothing of what was deleted.
		var listed bool
		reqs, listed = out.UnprocessedItems[s.table]
		if out.UnprocessedItems == nil || listed && reqs == nil {
			return fmt.Errorf("delete items of unlisted contexts: %w: the answer lists no unprocessed items", segments.ErrInvalidData)
		}
		if len(reqs) == 0 {
			return nil
		}
		if round == maxUnprocessedRetries {
			return fmt.Errorf("delete items of unlisted contexts: %w after %d tries", ErrUnprocessed, round+1)
		}
		if err := wait(ctx, backoff(round)); err != nil {
			return fmt.Errorf("delete items of unlisted contexts: %w: %w", ErrUnprocessed, err)
		}
	}
	return nil
}

// writeMetadata writes the synchronization time and, if it changed, the cursor, in one
// UpdateItem.
func (s *Store) writeMetadata(ctx context.Context, syncedOnMsec int64, cursor string, cursorChanged bool) error {
	in := &awsdynamodb.UpdateItemInput{TableName: &s.table, Key: primaryKey(s.metaKey, s.metaKey),
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": attrSynchronizedOn},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberN{Value: strconv.FormatInt(syncedOnMsec, 10)}},
	}
	if cursorChanged {
		in.UpdateExpression = aws.String("SET #s = :s, #v = :v")
		in.ExpressionAttributeNames["#v"] = attrLastVersion
		in.ExpressionAttributeValues[":v"] = &types.AttributeValueMemberS{Value: cursor}
	}
	if _, err := s.client.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("write metadata %s: %w", s.metaKey, err)
	}
	return nil
}

// storedCursor returns the cursor stored, "" for none, or nil when lastVersion holds
// something no instance takes for a cursor (too long, or not a string), which a load
// replaces.
func (s *Store) storedCursor(ctx context.Context) (*string, error) {
	k := itemKey{table: s.table, namespace: s.metaKey, key: s.metaKey}
	g := batchGet(ctx, s.client, true, s.observer, metadataProjection, []itemKey{k})[k]
	if g.err != nil {
		return nil, fmt.Errorf("read the stored cursor: %w", g.err)
	}
	v, ok := g.attrs[attrLastVersion]
	if !ok {
		none := ""
		return &none, nil
	}
	if sv, ok := v.(*types.AttributeValueMemberS); ok && len(sv.Value) <= segments.MaxCursorBytes {
		return &sv.Value, nil
	}
	return nil, nil
}
