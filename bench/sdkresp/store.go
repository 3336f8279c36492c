package main

import (
	"sync/atomic"

	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
)

// countingConfigurer builds the ldredis store wrapped in a countingStore, so that the
// benchmark sees the SDK's store lookups (its cache misses, after its own merging of
// concurrent ones).
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
