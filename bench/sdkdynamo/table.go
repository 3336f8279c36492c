package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// region is the region of every client of the emulator.
const region = "us-east-1"

// awsVars are the standard AWS variables with which bigseg (the AWS SDK's default chain)
// reaches endpoint with fake credentials, reading no profile or instance role of this
// machine. dir is a directory for the (empty) config files.
func awsVars(endpoint, dir string) []string {
	return []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint,
		"AWS_REGION=" + region,
		"AWS_ACCESS_KEY_ID=sdkdynamo",
		"AWS_SECRET_ACCESS_KEY=sdkdynamo",
		"AWS_SESSION_TOKEN=",
		"AWS_PROFILE=",
		"AWS_MAX_ATTEMPTS=",
		"AWS_CONFIG_FILE=" + dir + "/aws-config",
		"AWS_SHARED_CREDENTIALS_FILE=" + dir + "/aws-credentials",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CA_BUNDLE=",
	}
}

// newDynamoClient is a DynamoDB client of endpoint with fake credentials (the AWS SDK
// version LaunchDarkly's store requires), on hc if not nil. LaunchDarkly's store is given
// one like it: that SDK version predates AWS_ENDPOINT_URL_DYNAMODB. The signing region is
// given, because that version's EndpointResolverFromURL otherwise sets it on the endpoint it
// shares between calls, at every call (a data race, which go test -race reports).
func newDynamoClient(endpoint string, hc *http.Client) *awsdynamodb.Client {
	opts := awsdynamodb.Options{
		Region: region,
		EndpointResolver: awsdynamodb.EndpointResolverFromURL(endpoint, func(e *aws.Endpoint) {
			e.SigningRegion = region
		}),
		Credentials: credentials.NewStaticCredentialsProvider("sdkdynamo", "sdkdynamo", ""),
	}
	if hc != nil {
		opts.HTTPClient = hc
	}
	return awsdynamodb.New(opts)
}

// createTable creates a table of LaunchDarkly's layout (partition key "namespace", sort key
// "key") with a name of its own, and returns the name.
func createTable(ctx context.Context, c *awsdynamodb.Client, name string) (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	table := "sdkdynamo-" + name + "-" + hex.EncodeToString(b[:])
	_, err := c.CreateTable(ctx, &awsdynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("namespace"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("namespace"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("key"), KeyType: types.KeyTypeRange},
		},
	})
	if err != nil {
		return "", fmt.Errorf("create table %s: %w", table, err)
	}
	return table, nil
}

// LaunchDarkly's layout with no prefix (its default for DynamoDB), written out here on its own.
const (
	userNamespace = "big_segments_user"
	metadataKey   = "big_segments_metadata"
)

func itemKey(namespace, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"namespace": &types.AttributeValueMemberS{Value: namespace},
		"key":       &types.AttributeValueMemberS{Value: key},
	}
}

// change is one context's part of a patch: refs added to, and removed from, its sets.
type change struct {
	hash                           string
	addIncluded, addExcluded       []string
	removeIncluded, removeExcluded []string
}

// maxTransactItems is the most items of one TransactWriteItems call, as the Relay Proxy
// writes them.
const maxTransactItems = 25

// patch applies changes to table as the Relay Proxy applies a patch: TransactWriteItems calls
// of at most 25 items, each a ConditionCheck that the metadata's lastVersion is still previous
// ("" for none) and updates (ADD to and DELETE from the string sets); then an UpdateItem that
// sets lastVersion to version and synchronizedOn to syncedMs. A context's additions and
// removals are two updates, in two calls (an item appears once in a transaction).
// (internal/dynamotest.Patch, which this module cannot import.)
func patch(ctx context.Context, c *awsdynamodb.Client, table, previous, version string, syncedMs int64, changes []change) error {
	check := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: &table, Key: itemKey(metadataKey, metadataKey),
		ConditionExpression:      aws.String("attribute_not_exists(#v)"),
		ExpressionAttributeNames: map[string]string{"#v": "lastVersion"},
	}}
	if previous != "" {
		check.ConditionCheck.ConditionExpression = aws.String("#v = :prev")
		check.ConditionCheck.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": &types.AttributeValueMemberS{Value: previous}}
	}
	var updates []types.TransactWriteItem
	for _, ch := range changes {
		key := itemKey(userNamespace, ch.hash)
		if u := update(table, key, "ADD", ch.addIncluded, ch.addExcluded); u != nil {
			updates = append(updates, *u)
		}
		if u := update(table, key, "DELETE", ch.removeIncluded, ch.removeExcluded); u != nil {
			updates = append(updates, *u)
		}
	}
	for len(updates) > 0 {
		items, inTx := []types.TransactWriteItem{check}, map[string]bool{}
		var rest []types.TransactWriteItem
		for _, u := range updates {
			h := u.Update.Key["key"].(*types.AttributeValueMemberS).Value
			if len(items) == maxTransactItems || inTx[h] {
				rest = append(rest, u)
				continue
			}
			inTx[h] = true
			items = append(items, u)
		}
		if _, err := c.TransactWriteItems(ctx, &awsdynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
			return fmt.Errorf("patch %q -> %q: %w", previous, version, err)
		}
		updates = rest
	}
	_, err := c.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
		TableName: &table, Key: itemKey(metadataKey, metadataKey),
		UpdateExpression:         aws.String("SET #v = :v, #s = :s"),
		ExpressionAttributeNames: map[string]string{"#v": "lastVersion", "#s": "synchronizedOn"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":v": &types.AttributeValueMemberS{Value: version},
			":s": &types.AttributeValueMemberN{Value: strconv.FormatInt(syncedMs, 10)},
		},
	})
	if err != nil {
		return fmt.Errorf("set lastVersion %q: %w", version, err)
	}
	return nil
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

// setSynchronizedOn sets the metadata's synchronizedOn to ms, on its own, as the Relay Proxy
// does after every synchronization, idle ones included.
func setSynchronizedOn(ctx context.Context, c *awsdynamodb.Client, table string, ms int64) error {
	_, err := c.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
		TableName: &table, Key: itemKey(metadataKey, metadataKey),
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "synchronizedOn"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberN{Value: strconv.FormatInt(ms, 10)}},
	})
	if err != nil {
		return fmt.Errorf("set synchronizedOn: %w", err)
	}
	return nil
}

// put writes pop's items as they are, in BatchWriteItem calls of 25, then the metadata: a
// quick load of a large table for the benchmark (moto slows down, and grows by gigabytes, under
// hundreds of transactions), where how the data was written does not matter; the tests write
// the Relay Proxy's way (patch).
func put(ctx context.Context, c *awsdynamodb.Client, table, version string, syncedMs int64, pop []member) error {
	var reqs []types.WriteRequest
	flush := func() error {
		for len(reqs) > 0 {
			out, err := c.BatchWriteItem(ctx, &awsdynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			if err != nil {
				return fmt.Errorf("batch write: %w", err)
			}
			reqs = out.UnprocessedItems[table]
		}
		return nil
	}
	for _, m := range pop {
		inc, exc := m.sets()
		if len(inc)+len(exc) == 0 {
			continue
		}
		item := itemKey(userNamespace, contextHash(m.key))
		if len(inc) > 0 {
			item["included"] = &types.AttributeValueMemberSS{Value: inc}
		}
		if len(exc) > 0 {
			item["excluded"] = &types.AttributeValueMemberSS{Value: exc}
		}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		if len(reqs) == 25 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	meta := itemKey(metadataKey, metadataKey)
	meta["lastVersion"] = &types.AttributeValueMemberS{Value: version}
	meta["synchronizedOn"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(syncedMs, 10)}
	if _, err := c.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: &table, Item: meta}); err != nil {
		return fmt.Errorf("put metadata: %w", err)
	}
	return nil
}
