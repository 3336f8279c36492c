package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/bigseg/bigseg/segments"
)

// ErrUnprocessed is the error of a key that DynamoDB left unprocessed at every try of a
// read, until the read's context ended or the tries ran out: its item is not known, and is
// never taken for missing.
var ErrUnprocessed = errors.New("dynamodb: key left unprocessed")

// maxBatchGetKeys is the most keys one BatchGetItem may ask for.
const maxBatchGetKeys = 100

// Retries of unprocessed keys: a backoff that doubles from unprocessedBackoff up to
// maxUnprocessedBackoff (with jitter), for at most maxUnprocessedRetries rounds, so that a
// read on a context without a deadline still ends.
const (
	unprocessedBackoff    = 10 * time.Millisecond
	maxUnprocessedBackoff = 200 * time.Millisecond
	maxUnprocessedRetries = 10
)

// itemKey names one item of one table.
type itemKey struct{ table, namespace, key string }

// got is what a read found of one item: its attributes (nil when there is no item), or why
// it could not be read.
type got struct {
	attrs map[string]types.AttributeValue
	err   error
}

// projection is the attributes a read asks for, as an expression and its names.
type projection struct {
	expr  string
	names map[string]string
}

// batchGet reads the items of keys (duplicates read once), in BatchGetItem calls of at most
// 100 keys sent concurrently, and returns what it found of each; obs, if not nil, is told of
// the unprocessed keys asked for again.
func batchGet(ctx context.Context, client API, consistent bool, obs Observer, p projection, keys []itemKey) map[itemKey]got {
	seen := make(map[itemKey]struct{}, len(keys))
	unique := make([]itemKey, 0, len(keys))
	for _, k := range keys {
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			unique = append(unique, k)
		}
	}
	out := make(map[itemKey]got, len(unique))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for start := 0; start < len(unique); start += maxBatchGetKeys {
		chunk := unique[start:min(start+maxBatchGetKeys, len(unique))]
		read := func() {
			r := readChunk(ctx, client, consistent, obs, p, chunk)
			mu.Lock()
			defer mu.Unlock()
			for k, g := range r {
				out[k] = g
			}
		}
		if len(unique) <= maxBatchGetKeys {
			read()
			break
		}
		wg.Go(read)
	}
	wg.Wait()
	return out
}

// readChunk reads at most 100 items, asking again for the keys left unprocessed.
func readChunk(ctx context.Context, client API, consistent bool, obs Observer, p projection, keys []itemKey) map[itemKey]got {
	out := make(map[itemKey]got, len(keys))
	pending := keys
	for round := 0; ; round++ {
		resp, err := client.BatchGetItem(ctx, batchGetInput(consistent, p, pending))
		if err != nil {
			fail(out, pending, fmt.Errorf("batchgetitem: %w", err))
			return out
		}
		want, stray := answered(out, resp.Responses, pending)
		if stray {
			// Which key it stood for cannot be told: none of those left may read as no item.
			fail(out, keysOf(want), fmt.Errorf("%w: an item of the answer names no key asked for", segments.ErrInvalidData))
			return out
		}
		next, strange := unprocessed(resp.UnprocessedKeys, want)
		if strange {
			// Keys that name no item asked for: which ones were not processed cannot be told.
			fail(out, keysOf(want), fmt.Errorf("%w: the answer's unprocessed keys are not the keys asked for", ErrUnprocessed))
			return out
		}
		for _, k := range next {
			delete(want, k)
		}
		for k := range want {
			// Neither returned nor unprocessed: no item, if the answer names the table.
			// DynamoDB names every table asked for under Responses, with no items ([]) when
			// none was found; an answer that does not (an empty one, say), or names it with
			// null, tells nothing of it.
			if items, ok := resp.Responses[k.table]; ok && items != nil {
				out[k] = got{}
			} else {
				out[k] = got{err: fmt.Errorf("%w: the answer names neither the items nor the unprocessed keys of table %s", segments.ErrInvalidData, k.table)}
			}
		}
		if len(next) == 0 {
			return out
		}
		if round == maxUnprocessedRetries {
			fail(out, next, fmt.Errorf("%w after %d tries", ErrUnprocessed, round+1))
			return out
		}
		if err := wait(ctx, backoff(round)); err != nil {
			fail(out, next, fmt.Errorf("%w after %d tries: %w", ErrUnprocessed, round+1, err))
			return out
		}
		if obs != nil {
			obs.UnprocessedRetried(len(next))
		}
		pending = next
	}
}

// answered records in out the items of responses, and returns the keys of pending they did not
// answer; stray is set when an item names no key of pending (or names it not as a string).
func answered(out map[itemKey]got, responses map[string][]map[string]types.AttributeValue, pending []itemKey) (want map[itemKey]bool, stray bool) {
	want = make(map[itemKey]bool, len(pending))
	for _, k := range pending {
		want[k] = true
	}
	for table, items := range responses {
		for _, attrs := range items {
			k, ok := keyOf(table, attrs)
			if !ok || !want[k] {
				stray = true
				continue
			}
			out[k] = got{attrs: attrs}
			delete(want, k)
		}
	}
	return want, stray
}

func keysOf(set map[itemKey]bool) []itemKey {
	keys := make([]itemKey, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	return keys
}

func fail(out map[itemKey]got, keys []itemKey, err error) {
	for _, k := range keys {
		out[k] = got{err: err}
	}
}

// unprocessed returns the keys of want that u lists, and whether u lists any key that want
// does not have.
func unprocessed(u map[string]types.KeysAndAttributes, want map[itemKey]bool) (keys []itemKey, strange bool) {
	for table, ka := range u {
		for _, attrs := range ka.Keys {
			k, ok := keyOf(table, attrs)
			if !ok || !want[k] {
				strange = true
				continue
			}
			keys = append(keys, k)
		}
	}
	return keys, strange
}

// keyOf is the key of an item, or of a key, of table.
func keyOf(table string, attrs map[string]types.AttributeValue) (itemKey, bool) {
	ns, ok1 := attrs[attrNamespace].(*types.AttributeValueMemberS)
	key, ok2 := attrs[attrKey].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return itemKey{}, false
	}
	return itemKey{table: table, namespace: ns.Value, key: key.Value}, true
}

func batchGetInput(consistent bool, p projection, keys []itemKey) *awsdynamodb.BatchGetItemInput {
	req := map[string]types.KeysAndAttributes{}
	for _, k := range keys {
		ka, ok := req[k.table]
		if !ok {
			ka = types.KeysAndAttributes{ConsistentRead: &consistent, ProjectionExpression: &p.expr, ExpressionAttributeNames: p.names}
		}
		ka.Keys = append(ka.Keys, primaryKey(k.namespace, k.key))
		req[k.table] = ka
	}
	// The capacity consumed comes back in the answer (a few bytes), for the observer.
	return &awsdynamodb.BatchGetItemInput{RequestItems: req, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}
}

// primaryKey is the key of the item of namespace and key.
func primaryKey(namespace, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrNamespace: &types.AttributeValueMemberS{Value: namespace},
		attrKey:       &types.AttributeValueMemberS{Value: key},
	}
}

// backoff is how long to wait before the retry after round: doubling, capped, and jittered
// (between half and all of it) so that readers throttled together do not retry together.
func backoff(round int) time.Duration {
	d := unprocessedBackoff << min(round, 10)
	d = min(d, maxUnprocessedBackoff)
	return d/2 + rand.N(d/2+1)
}

// wait waits d, or until ctx ends, and then returns ctx's error.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
