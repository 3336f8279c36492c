package redis

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// LeaseKey is the key of the inventory's scan lease under prefix: the replica that holds it
// (its value, the owner) scans for the whole fleet until it expires.
func LeaseKey(prefix string) string { return prefix + ":bigseg_inventory_lease" }

// InventoryKey is the key of the last complete inventory under prefix: opaque bytes, as the
// caller saved them.
func InventoryKey(prefix string) string { return prefix + ":bigseg_inventory" }

// extendLease extends the lease if owner holds it, in one step: a lease that expires
// between a GET and a PEXPIRE sent apart could be extended for another owner.
var extendLease = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// releaseLease deletes the lease if owner holds it, in one step, as extendLease extends it: a
// lease that expired and that another replica took since is left to that one.
var releaseLease = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// ReleaseLease deletes the scan lease if owner holds it (a script that compares and deletes),
// and does nothing if not, so that another replica takes it at its next round rather than when
// it expires.
func (s *Store) ReleaseLease(ctx context.Context, owner string) error {
	key := LeaseKey(s.prefix)
	if err := releaseLease.Run(ctx, s.client, []string{key}, owner).Err(); err != nil {
		return fmt.Errorf("release the inventory lease %s: %w", key, err)
	}
	return nil
}

// TakeLease takes the scan lease for ttl if it is free (SET NX PX), or extends it if owner
// holds it already (a script that compares and extends), and says whether owner holds it now.
// Redis expires it, so replicas' clocks do not matter. A user who may not write gets Redis's
// error, wrapped, never false: NOPERM for an ACL user without SET (the first command sent),
// READONLY for a replica; both are also fs.ErrPermission, which tells the inventory not to ask
// again.
func (s *Store) TakeLease(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	key := LeaseKey(s.prefix)
	if owner == "" || ttl < time.Millisecond {
		return false, fmt.Errorf("take the inventory lease: an owner and a TTL of 1ms or more are needed (got %q, %v)", owner, ttl)
	}
	taken, err := s.client.SetNX(ctx, key, owner, ttl).Result()
	if err != nil && (strings.HasPrefix(err.Error(), "NOPERM") || strings.HasPrefix(err.Error(), "READONLY")) {
		return false, fmt.Errorf("take the inventory lease %s: %w (%w)", key, err, fs.ErrPermission)
	}
	if err != nil {
		return false, fmt.Errorf("take the inventory lease %s: %w", key, err)
	}
	if taken {
		return true, nil
	}
	n, err := extendLease.Run(ctx, s.client, []string{key}, owner, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("extend the inventory lease %s: %w", key, err)
	}
	return n == 1, nil
}

// SaveInventory stores data as the last complete inventory, replacing the one before.
func (s *Store) SaveInventory(ctx context.Context, data []byte) error {
	if err := s.client.Set(ctx, InventoryKey(s.prefix), data, 0).Err(); err != nil {
		return fmt.Errorf("save the inventory %s: %w", InventoryKey(s.prefix), err)
	}
	return nil
}

// LoadInventory returns the last inventory saved, nil (and no error) when there is none.
func (s *Store) LoadInventory(ctx context.Context) ([]byte, error) {
	data, err := s.client.Get(ctx, InventoryKey(s.prefix)).Bytes()
	switch {
	case errors.Is(err, goredis.Nil):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("load the inventory %s: %w", InventoryKey(s.prefix), err)
	}
	return data, nil
}
