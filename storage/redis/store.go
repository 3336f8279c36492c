// Package redis is the segments.Store of Redis data written in the LaunchDarkly Big Segments
// layout (by the Relay Proxy, an SDK's synchronizer, or "server load"), on go-redis v9, for
// standalone, Sentinel and Cluster deployments alike.
package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/segments"
)

// DefaultPrefix is the key prefix LaunchDarkly's synchronizers use unless configured otherwise.
const DefaultPrefix = "launchdarkly"

// Store reads Big Segments from Redis. It does not own the client: whoever made the client
// closes it.
type Store struct {
	client      goredis.UniversalClient
	prefix      string
	syncedOnKey string
	cursorKey   string
}

var _ segments.Store = (*Store)(nil)

// New returns a store reading keys under prefix; an empty prefix means DefaultPrefix.
func New(client goredis.UniversalClient, prefix string) *Store {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Store{client: client, prefix: prefix, syncedOnKey: prefix + ":big_segments_synchronized_on",
		cursorKey: prefix + ":big_segments_cursor"}
}

// IncludeKey is the set of refs a context is included in.
func (s *Store) IncludeKey(hash string) string { return s.prefix + ":big_segment_include:" + hash }

// ExcludeKey is the set of refs a context is excluded from.
func (s *Store) ExcludeKey(hash string) string { return s.prefix + ":big_segment_exclude:" + hash }

// SynchronizedOnKey holds the last synchronization time, unix milliseconds as a decimal string.
func (s *Store) SynchronizedOnKey() string { return s.syncedOnKey }

// CursorKey holds the synchronizer's version of the data, an opaque string that the Relay
// Proxy sets in the same transaction as every change.
func (s *Store) CursorKey() string { return s.cursorKey }

// Memberships implements segments.Store with one pipeline of two SMEMBERS per hash: one round
// trip for any number of contexts on a standalone server (one per node on a cluster, sent
// concurrently by go-redis). A failure of one context's commands (a key of the wrong type)
// fails that context only.
func (s *Store) Memberships(ctx context.Context, hashes []string) []segments.Read {
	pipe := s.client.Pipeline()
	cmds := make([]*goredis.StringSliceCmd, 2*len(hashes))
	for i, h := range hashes {
		cmds[2*i] = pipe.SMembers(ctx, s.IncludeKey(h))
		cmds[2*i+1] = pipe.SMembers(ctx, s.ExcludeKey(h))
	}
	_, execErr := pipe.Exec(ctx)
	reads := make([]segments.Read, len(hashes))
	if execErr != nil && !anyErr(cmds) {
		// The pipeline never ran (go-redis reports a failed connection set-up, such as a
		// rejected password, on Exec only): its commands' empty results mean nothing.
		for i := range reads {
			reads[i].Err = fmt.Errorf("pipeline: %w", execErr)
		}
		return reads
	}
	for i := range hashes {
		inc, err := cmds[2*i].Result()
		if err != nil {
			reads[i].Err = fmt.Errorf("smembers include: %w", err)
			continue
		}
		exc, err := cmds[2*i+1].Result()
		if err != nil {
			reads[i].Err = fmt.Errorf("smembers exclude: %w", err)
			continue
		}
		reads[i].Membership = segments.NewMembership(inc, exc)
	}
	return reads
}

func anyErr(cmds []*goredis.StringSliceCmd) bool {
	for _, c := range cmds {
		if c.Err() != nil {
			return true
		}
	}
	return false
}

// Metadata implements segments.Store: synchronized_on and the cursor, in one pipeline (on a
// cluster the two keys are in different slots unless the prefix is hash-tagged, so the
// pipeline may go to two nodes, concurrently). A missing synchronized_on key, or 0, means
// never synchronized; a missing cursor means none. A synchronized_on that is not unix
// milliseconds up to year 9999, or a key of the wrong type, is segments.ErrInvalidMetadata,
// since trusting it would hide a broken synchronizer.
func (s *Store) Metadata(ctx context.Context) (segments.Metadata, error) {
	pipe := s.client.Pipeline()
	syncedCmd, cursorCmd := pipe.Get(ctx, s.syncedOnKey), pipe.Get(ctx, s.cursorKey)
	_, execErr := pipe.Exec(ctx)
	var md segments.Metadata
	if execErr != nil && !errors.Is(execErr, goredis.Nil) && syncedCmd.Err() == nil && cursorCmd.Err() == nil {
		// The pipeline never ran (go-redis reports a failed connection set-up, such as a
		// rejected password, on Exec only): its commands' empty results mean nothing.
		return md, fmt.Errorf("pipeline: %w", execErr)
	}
	synced, present, err := value(syncedCmd)
	if err != nil {
		return md, err
	}
	if md.Cursor, _, err = value(cursorCmd); err != nil {
		return md, err
	}
	if !present {
		return md, nil
	}
	ms, err := strconv.ParseInt(synced, 10, 64)
	if err != nil || ms < 0 || ms > segments.MaxSynchronizedOn.UnixMilli() {
		return md, fmt.Errorf("%w: %s holds %.40q, not unix milliseconds", segments.ErrInvalidMetadata, s.syncedOnKey, synced)
	}
	if ms > 0 {
		md.LastSynchronized = time.UnixMilli(ms)
	}
	return md, nil
}

// value is a GET's string, and whether the key exists.
func value(cmd *goredis.StringCmd) (string, bool, error) {
	v, err := cmd.Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return "", false, nil
	case goredis.HasErrorPrefix(err, "WRONGTYPE"):
		return "", false, fmt.Errorf("%w: get %s: %w", segments.ErrInvalidMetadata, cmd.Args()[1], err)
	case err != nil:
		return "", false, fmt.Errorf("get %s: %w", cmd.Args()[1], err)
	}
	return v, true, nil
}
