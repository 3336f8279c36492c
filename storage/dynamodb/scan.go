package dynamodb

import (
	"context"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/bigseg/bigseg/segments"
)

// scanPage is how many items a page of a scan's Query reads (Limit): what a scan holds in
// memory at once, whatever the number of contexts stored.
const scanPage = 100

// Scan is the inventory's scan with a Query of the contexts' namespace, a page of 100
// items at a time (each next page starting after the last key of the one before), strongly
// consistent unless WithConsistentRead(false), asking for the capacity consumed (ReadUnits
// adds it up). Each item is one context, emitted once with both its sets; an item with neither
// set is no membership, and is not emitted. Items written during the scan are seen if their
// key comes after the page being read.
//
// An answer without Items, an item that is not a context's of the prefix, a set that is not a
// string set, or a ref that is not valid UTF-8, fails the scan with segments.ErrInvalidData; a
// failed call fails it too. Every call is bounded by the client's retries and ctx; no
// connection is held while each runs. After each page, walked is told the items it read that
// are not emitted (those with neither set).
func (s *Store) Scan(ctx context.Context, walked func(skipped int) error, each func(hash string, m segments.Membership) error) error {
	in := &awsdynamodb.QueryInput{
		TableName: &s.table, ConsistentRead: aws.Bool(s.consistent), Limit: aws.Int32(scanPage),
		KeyConditionExpression:    aws.String("#n = :n"),
		ProjectionExpression:      aws.String(membershipProjection.expr),
		ExpressionAttributeNames:  membershipProjection.names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberS{Value: s.userNS}},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	}
	for {
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return fmt.Errorf("scan: query %s: %w", s.userNS, err)
		}
		s.addReadUnits(out.ConsumedCapacity)
		page, err := s.scannedPage(out)
		if err != nil {
			return err
		}
		if err := walked(len(out.Items) - len(page)); err != nil {
			return err
		}
		for _, c := range page {
			if err := each(c.hash, c.m); err != nil {
				return err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// scanned is one context of a page, as read.
type scanned struct {
	hash string
	m    segments.Membership
}

// scannedPage is the contexts of a page of the scan's Query that have refs.
func (s *Store) scannedPage(out *awsdynamodb.QueryOutput) ([]scanned, error) {
	// DynamoDB lists the items of every page, [] for none: an answer that does not (an empty
	// one, say) tells nothing of what is stored.
	if out.Items == nil {
		return nil, fmt.Errorf("scan: query %s: %w: the answer lists no items", s.userNS, segments.ErrInvalidData)
	}
	page := make([]scanned, 0, len(out.Items))
	for _, item := range out.Items {
		k, ok := keyOf(s.table, item)
		if !ok || k.namespace != s.userNS {
			return nil, fmt.Errorf("scan: query %s: %w: an item of the answer is not a context's of the prefix", s.userNS, segments.ErrInvalidData)
		}
		m, err := parseMembership(item)
		if err != nil {
			return nil, fmt.Errorf("scan: item %s/%s: %w", k.namespace, k.key, err)
		}
		for ref := range m.All() {
			if !utf8.ValidString(ref) {
				return nil, fmt.Errorf("scan: item %s/%s: %w: a ref is not valid UTF-8: %q", k.namespace, k.key, segments.ErrInvalidData, ref)
			}
		}
		if m != (segments.Membership{}) {
			page = append(page, scanned{k.key, m})
		}
	}
	return page, nil
}

// addReadUnits adds the read units an answer says were consumed to ReadUnits.
func (s *Store) addReadUnits(c *types.ConsumedCapacity) {
	if c == nil {
		return
	}
	units := aws.ToFloat64(c.CapacityUnits)
	if c.ReadCapacityUnits != nil {
		units = *c.ReadCapacityUnits
	}
	for {
		old := s.readUnits.Load()
		if s.readUnits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+units)) {
			return
		}
	}
}

// ReadUnits is the read capacity units that the answers to this store's scans said they
// consumed, since the store was made: what the inventory costs, for an operator to weigh
// against how often it runs (a caller subtracts the value before a scan from the value after).
func (s *Store) ReadUnits() float64 { return math.Float64frombits(s.readUnits.Load()) }

// Describe is how explain and /status name the store: the table, the prefix ("" for none), and the one
// item a read of hash reads, as "namespace/key".
func (s *Store) Describe(hash string) segments.StoreView {
	v := segments.StoreView{Kind: "dynamodb", Prefix: s.prefix, Table: s.table}
	if hash != "" {
		v.Keys = []string{s.userNS + "/" + hash}
	}
	return v
}
