package dynamodb

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithy "github.com/aws/smithy-go"

	"github.com/bigseg/bigseg/segments"
)

// The inventory's items: the lease and the last complete result, in a namespace of their own
// under the prefix, beside LaunchDarkly's.
const (
	inventoryBase = "bigseg_inventory"
	leaseKey      = "lease"
	resultKey     = "result"
	attrOwner     = "owner"
	attrExpiresAt = "expiresAt" // unix milliseconds, by the clock of the replica that took the lease
	attrData      = "data"      // the result, gzipped
)

// Bounds of the saved inventory: DynamoDB's item size (attribute names and values), and what
// a load decompresses at most, so that a corrupt item cannot take the process's memory.
const (
	maxItemBytes      = 400 * 1024
	maxInventoryBytes = 64 << 20
)

// InventoryNamespace is the namespace of the inventory's items: key "lease" and key "result".
func (s *Store) InventoryNamespace() string { return namespace(s.prefix, inventoryBase) }

// TakeLease takes the scan lease until now+ttl if it is free (no item, or one whose expiry has
// passed) or owner's already (then extending it), with one conditional PutItem, and says
// whether owner holds it now. The expiry is written by this replica's clock and compared with
// the asker's: docs/dynamodb.md says what clock skew between replicas does. A user who may not write gets DynamoDB's error
// (AccessDeniedException), wrapped, never false, and fs.ErrPermission, which tells the
// inventory not to ask again.
func (s *Store) TakeLease(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	if owner == "" || ttl < time.Millisecond {
		return false, fmt.Errorf("take the inventory lease: an owner and a TTL of 1ms or more are needed (got %q, %v)", owner, ttl)
	}
	at := time.Now()
	item := primaryKey(s.InventoryNamespace(), leaseKey)
	item[attrOwner] = &types.AttributeValueMemberS{Value: owner}
	item[attrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(at.Add(ttl).UnixMilli(), 10)}
	_, err := s.client.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: &s.table, Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(#k) OR #o = :o OR #x <= :now"),
		ExpressionAttributeNames: map[string]string{"#k": attrKey, "#o": attrOwner, "#x": attrExpiresAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: owner},
			":now": &types.AttributeValueMemberN{Value: strconv.FormatInt(at.UnixMilli(), 10)}},
	})
	var held *types.ConditionalCheckFailedException
	var api smithy.APIError
	switch {
	case errors.As(err, &held):
		return false, nil
	case errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException":
		return false, fmt.Errorf("take the inventory lease %s/%s: %w (%w)", s.InventoryNamespace(), leaseKey, err, fs.ErrPermission)
	case err != nil:
		return false, fmt.Errorf("take the inventory lease %s/%s: %w", s.InventoryNamespace(), leaseKey, err)
	}
	return true, nil
}

// ReleaseLease deletes the scan lease if owner holds it (a DeleteItem on the condition that
// owner is its owner), and does nothing if not, so that another replica takes it at its next
// round rather than when it expires.
func (s *Store) ReleaseLease(ctx context.Context, owner string) error {
	_, err := s.client.DeleteItem(ctx, &awsdynamodb.DeleteItemInput{TableName: &s.table, Key: primaryKey(s.InventoryNamespace(), leaseKey),
		ConditionExpression:       aws.String("#o = :o"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: owner}},
	})
	var other *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &other) {
		return fmt.Errorf("release the inventory lease %s/%s: %w", s.InventoryNamespace(), leaseKey, err)
	}
	return nil
}

// SaveInventory stores data, gzipped, as the last complete inventory (one PutItem that
// replaces the one before). An item over DynamoDB's 400 KB is refused before it is sent.
func (s *Store) SaveInventory(ctx context.Context, data []byte) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(data) // a bytes.Buffer takes every write
	_ = zw.Close()
	ns := s.InventoryNamespace()
	size := len(attrNamespace) + len(ns) + len(attrKey) + len(resultKey) + len(attrData) + buf.Len()
	if size > maxItemBytes {
		return fmt.Errorf("save the inventory: its %d bytes gzip to %d, an item of %d bytes: more than DynamoDB's 400 KB (%d bytes) per item",
			len(data), buf.Len(), size, maxItemBytes)
	}
	item := primaryKey(ns, resultKey)
	item[attrData] = &types.AttributeValueMemberB{Value: buf.Bytes()}
	if _, err := s.client.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: &s.table, Item: item}); err != nil {
		return fmt.Errorf("save the inventory %s/%s: %w", ns, resultKey, err)
	}
	return nil
}

// LoadInventory returns the last inventory saved (a strongly consistent GetItem), nil and no
// error when there is none. An item whose data is not binary, not gzip, or larger than 64 MB
// decompressed, is segments.ErrInvalidData.
func (s *Store) LoadInventory(ctx context.Context) ([]byte, error) {
	ns := s.InventoryNamespace()
	out, err := s.client.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: &s.table, Key: primaryKey(ns, resultKey),
		ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("#d"), ExpressionAttributeNames: map[string]string{"#d": attrData}})
	if err != nil {
		return nil, fmt.Errorf("load the inventory %s/%s: %w", ns, resultKey, err)
	}
	if out.Item == nil {
		return nil, nil
	}
	b, ok := out.Item[attrData].(*types.AttributeValueMemberB)
	if !ok {
		return nil, fmt.Errorf("load the inventory %s/%s: %w: %s is missing or not binary (B)", ns, resultKey, segments.ErrInvalidData, attrData)
	}
	data, err := gunzip(b.Value)
	if err != nil {
		return nil, fmt.Errorf("load the inventory %s/%s: %w: %w", ns, resultKey, segments.ErrInvalidData, err)
	}
	return data, nil
}

// gunzip is the decompressed gz, of at most maxInventoryBytes.
func gunzip(gz []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(zr, maxInventoryBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxInventoryBytes {
		return nil, fmt.Errorf("more than %d bytes decompressed", maxInventoryBytes)
	}
	return data, nil
}
