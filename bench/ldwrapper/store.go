package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/launchdarkly/go-sdk-common/v3/ldtime"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems/ldstoreimpl"
	goredis "github.com/redis/go-redis/v9"
)

// store is the subsystems.BigSegmentStore that LaunchDarkly's Redis integrations
// (go-server-sdk-redis-go-redis and -redigo) implement, written again here because their
// modules are not available to this build. It reads the same keys the same way: GET of
// {prefix}:big_segments_synchronized_on for the metadata, and for a membership two SMEMBERS
// one after the other (not pipelined, so two round trips), include set first.
type store struct {
	client      goredis.UniversalClient
	prefix      string
	syncedOnKey string
	reads       atomic.Int64 // GetMembership calls: the wrapper's cache misses after singleflight
}

var _ subsystems.BigSegmentStore = (*store)(nil)

func newStore(client goredis.UniversalClient, prefix string) *store {
	return &store{client: client, prefix: prefix, syncedOnKey: prefix + ":big_segments_synchronized_on"}
}

// GetMetadata implements subsystems.BigSegmentStore. A missing key means never synchronized,
// as in the redigo integration.
func (s *store) GetMetadata() (subsystems.BigSegmentStoreMetadata, error) {
	v, err := s.client.Get(context.Background(), s.syncedOnKey).Result()
	if errors.Is(err, goredis.Nil) {
		return subsystems.BigSegmentStoreMetadata{}, nil
	}
	if err != nil {
		return subsystems.BigSegmentStoreMetadata{}, err
	}
	ms, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return subsystems.BigSegmentStoreMetadata{}, fmt.Errorf("%s: %w", s.syncedOnKey, err)
	}
	return subsystems.BigSegmentStoreMetadata{LastUpToDate: ldtime.UnixMillisecondTime(ms)}, nil
}

// GetMembership implements subsystems.BigSegmentStore.
func (s *store) GetMembership(contextHash string) (subsystems.BigSegmentMembership, error) {
	s.reads.Add(1)
	ctx := context.Background()
	included, err := s.client.SMembers(ctx, s.prefix+":big_segment_include:"+contextHash).Result()
	if err != nil {
		return nil, err
	}
	excluded, err := s.client.SMembers(ctx, s.prefix+":big_segment_exclude:"+contextHash).Result()
	if err != nil {
		return nil, err
	}
	return newMembership(contextHash, included, excluded), nil
}

// Close implements subsystems.BigSegmentStore. The client belongs to main.
func (s *store) Close() error { return nil }

// membership is what the store returns: the SDK's own membership, for CheckMembership, plus
// the lists it was made of, which the SDK's interface cannot enumerate but a response must,
// and the context's hash, so that a cache hit does not hash the key again.
type membership struct {
	subsystems.BigSegmentMembership
	hash     string
	included []string
	excluded []string
}

func newMembership(hash string, included, excluded []string) *membership {
	return &membership{
		BigSegmentMembership: ldstoreimpl.NewBigSegmentMembershipFromSegmentRefs(included, excluded),
		hash:                 hash,
		included:             included,
		excluded:             excluded,
	}
}

// refs maps each ref to true (included) or false (excluded); included wins.
func (m *membership) refs() map[string]bool {
	refs := make(map[string]bool, len(m.included)+len(m.excluded))
	for _, ref := range m.excluded {
		refs[ref] = false
	}
	for _, ref := range m.included {
		refs[ref] = true
	}
	return refs
}
