package main

import (
	"fmt"
	"sync/atomic"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	lddynamodb "github.com/launchdarkly/go-server-sdk-dynamodb/v4"
	ldredis "github.com/launchdarkly/go-server-sdk-redis-redigo/v3"
	ldclient "github.com/launchdarkly/go-server-sdk/v7"
	"github.com/launchdarkly/go-server-sdk/v7/ldcomponents"
	"github.com/launchdarkly/go-server-sdk/v7/ldfiledata"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
)

// The two ways the SDK reads Big Segments here.
const (
	viaDynamo = "lddynamodb -> DynamoDB"        // LaunchDarkly's DynamoDB store, on the table
	viaBigseg = "ldredis -> bigseg -> DynamoDB" // LaunchDarkly's Redis store, on bigseg's Redis-protocol listener
)

// dynamoStore is LaunchDarkly's DynamoDB Big Segment store on table, with no prefix (its
// default), reading through c.
func dynamoStore(table string, c *awsdynamodb.Client) subsystems.ComponentConfigurer[subsystems.BigSegmentStore] {
	return lddynamodb.BigSegmentStore(table).DynamoClient(c)
}

// redisStore is LaunchDarkly's Redis Big Segment store at its defaults (prefix launchdarkly)
// dialling addr: bigseg's Redis-protocol listener.
func redisStore(addr string) subsystems.ComponentConfigurer[subsystems.BigSegmentStore] {
	return ldredis.BigSegmentStore().URL("redis://" + addr)
}

// sdkCache is the SDK's Big Segments settings.
type sdkCache struct {
	off        bool          // ContextCacheTime 0: every evaluation asks the store
	ttl        time.Duration // ContextCacheTime, unless off; 0 is the SDK's default (5 s)
	statusPoll time.Duration // StatusPollInterval; 0 is the SDK's default (5 s)
}

// newSDK makes an SDK client with the flag of flagFile and store as its Big Segment store,
// counted.
func newSDK(store subsystems.ComponentConfigurer[subsystems.BigSegmentStore], cache sdkCache, flagFile string) (*ldclient.LDClient, *countingStore, error) {
	counting := &countingConfigurer{inner: store}
	bs := ldcomponents.BigSegments(counting)
	switch {
	case cache.off:
		bs.ContextCacheTime(0) // every entry has expired when read
	case cache.ttl > 0:
		bs.ContextCacheTime(cache.ttl)
	}
	if cache.statusPoll > 0 {
		bs.StatusPollInterval(cache.statusPoll)
	}
	client, err := ldclient.MakeCustomClient("sdkdynamo-sdk-key", ldclient.Config{
		DataSource:       ldfiledata.DataSource().FilePaths(flagFile),
		Events:           ldcomponents.NoEvents(),
		DiagnosticOptOut: true,
		Logging:          ldcomponents.NoLogging(),
		BigSegments:      bs,
	}, 5*time.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("SDK client: %w", err)
	}
	return client, counting.store, nil
}

// countingConfigurer builds a store wrapped in a countingStore, so that callers see the SDK's
// store lookups (its cache misses, after its own merging of concurrent ones).
type countingConfigurer struct {
	inner subsystems.ComponentConfigurer[subsystems.BigSegmentStore]
	store *countingStore
}

func (c *countingConfigurer) Build(ctx subsystems.ClientContext) (subsystems.BigSegmentStore, error) {
	s, err := c.inner.Build(ctx)
	if err != nil {
		return nil, err
	}
	c.store = &countingStore{BigSegmentStore: s}
	return c.store, nil
}

// countingStore counts GetMembership calls and their errors.
type countingStore struct {
	subsystems.BigSegmentStore
	calls, errs atomic.Int64
}

func (s *countingStore) GetMembership(contextHash string) (subsystems.BigSegmentMembership, error) {
	s.calls.Add(1)
	m, err := s.BigSegmentStore.GetMembership(contextHash)
	if err != nil {
		s.errs.Add(1)
	}
	return m, err
}
