package main

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/launchdarkly/go-sdk-common/v3/ldtime"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems/ldstoreimpl"
	goredis "github.com/redis/go-redis/v9"
)

// redisStore is the Go SDK reading Redis directly: a Big Segment store over go-redis with the
// reads LaunchDarkly's ldredis integration makes (its module is not available here): SMEMBERS
// of the include set, then of the exclude set, one after the other, and GET of
// big_segments_synchronized_on. With pipelined, the two SMEMBERS go in one round trip instead
// (what bigseg itself does), the best a direct reader can do.
type redisStore struct {
	client    *goredis.Client
	prefix    string
	pipelined bool
}

var _ subsystems.BigSegmentStore = (*redisStore)(nil)

func (s *redisStore) GetMembership(hash string) (subsystems.BigSegmentMembership, error) {
	ctx := context.Background()
	incKey := s.prefix + ":big_segment_include:" + hash
	excKey := s.prefix + ":big_segment_exclude:" + hash
	var included, excluded []string
	if s.pipelined {
		pipe := s.client.Pipeline()
		inc := pipe.SMembers(ctx, incKey)
		exc := pipe.SMembers(ctx, excKey)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
		included, excluded = inc.Val(), exc.Val()
	} else {
		var err error
		if included, err = s.client.SMembers(ctx, incKey).Result(); err != nil {
			return nil, err
		}
		if excluded, err = s.client.SMembers(ctx, excKey).Result(); err != nil {
			return nil, err
		}
	}
	return ldstoreimpl.NewBigSegmentMembershipFromSegmentRefs(included, excluded), nil
}

func (s *redisStore) GetMetadata() (subsystems.BigSegmentStoreMetadata, error) {
	v, err := s.client.Get(context.Background(), s.prefix+":big_segments_synchronized_on").Result()
	if errors.Is(err, goredis.Nil) {
		return subsystems.BigSegmentStoreMetadata{}, nil
	}
	if err != nil {
		return subsystems.BigSegmentStoreMetadata{}, err
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return subsystems.BigSegmentStoreMetadata{}, err
	}
	return subsystems.BigSegmentStoreMetadata{LastUpToDate: ldtime.UnixMillisecondTime(ms)}, nil
}

func (s *redisStore) Close() error { return s.client.Close() }

// redisStoreConfigurer makes a redisStore with go-redis's default options, as ldredis does.
type redisStoreConfigurer struct {
	addr, prefix string
	pipelined    bool
}

func (c redisStoreConfigurer) Build(subsystems.ClientContext) (subsystems.BigSegmentStore, error) {
	return &redisStore{client: goredis.NewClient(&goredis.Options{Addr: c.addr}), prefix: c.prefix, pipelined: c.pipelined}, nil
}

// countingStore wraps the store under test to count and time the SDK's membership queries:
// the SDK calls the store only on a cache miss, so this is the "store lookups per evaluation"
// and the latency each miss pays.
type countingStore struct {
	subsystems.BigSegmentStore
	calls atomic.Int64
	errs  atomic.Int64

	mu        sync.Mutex
	recording bool
	latencies []time.Duration
}

func (s *countingStore) GetMembership(hash string) (subsystems.BigSegmentMembership, error) {
	start := time.Now()
	m, err := s.BigSegmentStore.GetMembership(hash)
	d := time.Since(start)
	s.calls.Add(1)
	if err != nil {
		s.errs.Add(1)
	}
	s.mu.Lock()
	if s.recording {
		s.latencies = append(s.latencies, d)
	}
	s.mu.Unlock()
	return m, err
}

// record starts (or stops) keeping latencies, and returns those kept so far, sorted.
func (s *countingStore) record(on bool) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recording = on
	out := s.latencies
	s.latencies = nil
	slices.Sort(out)
	return out
}

// countingConfigurer builds the wrapped store and keeps it, for the measurement to read.
type countingConfigurer struct {
	inner subsystems.ComponentConfigurer[subsystems.BigSegmentStore]
	store *countingStore
}

func (c *countingConfigurer) Build(ctx subsystems.ClientContext) (subsystems.BigSegmentStore, error) {
	inner, err := c.inner.Build(ctx)
	if err != nil {
		return nil, err
	}
	c.store = &countingStore{BigSegmentStore: inner}
	return c.store, nil
}
