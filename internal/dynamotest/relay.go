package dynamotest

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// LaunchDarkly's layout, written out here on its own rather than taken from the store, so
// that a store that got it wrong fails against it.

// UserNamespace is the namespace of the items of contexts under prefix.
func UserNamespace(prefix string) string { return prefixed(prefix, "big_segments_user") }

// MetadataKey is the namespace, and the key, of the metadata item under prefix.
func MetadataKey(prefix string) string { return prefixed(prefix, "big_segments_metadata") }

func prefixed(prefix, base string) string {
	if prefix == "" {
		return base
	}
	return prefix + ":" + base
}

// Key is the primary key of an item.
func Key(namespace, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"namespace": &types.AttributeValueMemberS{Value: namespace},
		"key":       &types.AttributeValueMemberS{Value: key},
	}
}

// Change is one context's part of a patch: refs added to, and removed from, its sets.
type Change struct {
	Hash                           string
	AddIncluded, AddExcluded       []string
	RemoveIncluded, RemoveExcluded []string
}

// maxTransactItems is the most items of one TransactWriteItems call, as the Relay Proxy
// writes them.
const maxTransactItems = 25

// Patch applies changes to table under prefix as the Relay Proxy applies a patch: in
// TransactWriteItems calls of at most 25 items, each a ConditionCheck that the metadata's
// lastVersion is still previous ("" for none) and the updates (ADD to and DELETE from the
// string sets); then, unless version is "", an UpdateItem that sets lastVersion to version.
// A context's additions and removals of one set are two updates, in two calls.
func Patch(t testing.TB, c *awsdynamodb.Client, table, prefix, previous, version string, changes []Change) {
	t.Helper()
	ctx := context.Background()
	meta := MetadataKey(prefix)
	check := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: &table, Key: Key(meta, meta),
		ConditionExpression:      aws.String("attribute_not_exists(#v)"),
		ExpressionAttributeNames: map[string]string{"#v": "lastVersion"},
	}}
	if previous != "" {
		check.ConditionCheck.ConditionExpression = aws.String("#v = :prev")
		check.ConditionCheck.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": &types.AttributeValueMemberS{Value: previous}}
	}
	var updates []types.TransactWriteItem
	for _, ch := range changes {
		key := Key(UserNamespace(prefix), ch.Hash)
		if u := update(table, key, "ADD", ch.AddIncluded, ch.AddExcluded); u != nil {
			updates = append(updates, *u)
		}
		if u := update(table, key, "DELETE", ch.RemoveIncluded, ch.RemoveExcluded); u != nil {
			updates = append(updates, *u)
		}
	}
	for len(updates) > 0 {
		items, inTx := []types.TransactWriteItem{check}, map[string]bool{}
		rest := updates[:0:0]
		for _, u := range updates {
			h := u.Update.Key["key"].(*types.AttributeValueMemberS).Value
			if len(items) == maxTransactItems || inTx[h] { // an item appears once in a transaction
				rest = append(rest, u)
				continue
			}
			inTx[h] = true
			items = append(items, u)
		}
		if _, err := c.TransactWriteItems(ctx, &awsdynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
			t.Fatalf("patch %q -> %q: %v", previous, version, err)
		}
		updates = rest
	}
	if version == "" {
		return
	}
	_, err := c.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
		TableName: &table, Key: Key(meta, meta),
		UpdateExpression:          aws.String("SET #v = :v"),
		ExpressionAttributeNames:  map[string]string{"#v": "lastVersion"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: version}},
	})
	if err != nil {
		t.Fatalf("set lastVersion %q: %v", version, err)
	}
}

// Write writes the contexts of changes (their additions only) under prefix as whole items,
// in BatchWriteItem calls of 25: the items a first patch makes, without the Relay Proxy's
// transactions, for tests that need many contexts. moto copies a table for each item of a
// transaction, so that Patch's time grows with the table's size times the changes'.
func Write(t testing.TB, c *awsdynamodb.Client, table, prefix string, changes []Change) {
	t.Helper()
	var puts []types.WriteRequest
	for _, ch := range changes {
		item := Key(UserNamespace(prefix), ch.Hash)
		for attr, refs := range map[string][]string{"included": ch.AddIncluded, "excluded": ch.AddExcluded} {
			if len(refs) > 0 {
				item[attr] = &types.AttributeValueMemberSS{Value: refs}
			}
		}
		if len(item) > 2 {
			puts = append(puts, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
	}
	for len(puts) > 0 {
		n := min(len(puts), maxTransactItems)
		out, err := c.BatchWriteItem(context.Background(), &awsdynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{table: puts[:n]}})
		if err != nil || len(out.UnprocessedItems) > 0 {
			t.Fatalf("write %d items: %v (%d unprocessed)", n, err, len(out.UnprocessedItems))
		}
		puts = puts[n:]
	}
}

// update is an update of key that applies action (ADD or DELETE) with the refs given to each
// set, nil when there are none.
func update(table string, key map[string]types.AttributeValue, action string, included, excluded []string) *types.TransactWriteItem {
	expr, names, values := action, map[string]string{}, map[string]types.AttributeValue{}
	for i, set := range []struct {
		attr string
		refs []string
	}{{"included", included}, {"excluded", excluded}} {
		if len(set.refs) == 0 {
			continue
		}
		if len(names) > 0 {
			expr += ","
		}
		n := strconv.Itoa(i)
		expr += " #a" + n + " :r" + n
		names["#a"+n] = set.attr
		values[":r"+n] = &types.AttributeValueMemberSS{Value: set.refs}
	}
	if len(names) == 0 {
		return nil
	}
	return &types.TransactWriteItem{Update: &types.Update{TableName: &table, Key: key,
		UpdateExpression: &expr, ExpressionAttributeNames: names, ExpressionAttributeValues: values}}
}

// SetSynchronizedOn sets the metadata's synchronizedOn to ms, on its own, as the Relay Proxy
// does after every synchronization, idle ones included.
func SetSynchronizedOn(t testing.TB, c *awsdynamodb.Client, table, prefix string, ms int64) {
	t.Helper()
	meta := MetadataKey(prefix)
	_, err := c.UpdateItem(context.Background(), &awsdynamodb.UpdateItemInput{
		TableName: &table, Key: Key(meta, meta),
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "synchronizedOn"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberN{Value: strconv.FormatInt(ms, 10)}},
	})
	if err != nil {
		t.Fatalf("set synchronizedOn: %v", err)
	}
}

// Put writes item as it is: for data no synchronizer writes (values of the wrong type).
func Put(t testing.TB, c *awsdynamodb.Client, table string, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := c.PutItem(context.Background(), &awsdynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatalf("put item: %v", err)
	}
}

// Item is the item of key, nil when there is none.
func Item(t testing.TB, c *awsdynamodb.Client, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := c.GetItem(context.Background(), &awsdynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("get item: %v", err)
	}
	return out.Item
}
