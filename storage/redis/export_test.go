package redis

import (
	"maps"
	"slices"
)

// The store's metadata keys, for the tests of this directory.

func (s *Store) SynchronizedOnKey() string { return s.syncedOnKey }
func (s *Store) CursorKey() string         { return s.cursorKey }

// ClusterAddrs are the addresses whose state a cluster's store keeps (see clusterNodes),
// sorted; "" stands for slots without a master.
func (s *Store) ClusterAddrs() []string {
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	return slices.Sorted(maps.Keys(s.nodes.nodes))
}
