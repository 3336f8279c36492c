// Package redis is the segments.Store of Redis data written in the LaunchDarkly Big Segments
// layout (by the Relay Proxy, an SDK's synchronizer, or "server load"), on go-redis v9, for
// standalone, Sentinel and Cluster deployments alike.
package redis

import (
	"context"
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
	nodes       *clusterNodes // a cluster's; nil for other clients
}

var _ segments.Store = (*Store)(nil)

// New returns a store reading keys under prefix; an empty prefix means DefaultPrefix.
func New(client goredis.UniversalClient, prefix string) *Store { return NewStores(client, prefix)[0] }

// NewStores returns a store for each prefix (the environments of one Redis, as the Relay
// Proxy writes them), on one client; see Metadatas.
func NewStores(client goredis.UniversalClient, prefixes ...string) []*Store {
	var nodes *clusterNodes
	if cc, ok := client.(*goredis.ClusterClient); ok {
		nodes = newClusterNodes(cc)
	}
	stores := make([]*Store, len(prefixes))
	for i, prefix := range prefixes {
		if prefix == "" {
			prefix = DefaultPrefix
		}
		syncedOn, cursor := MetadataKeys(prefix)
		stores[i] = &Store{client: client, prefix: prefix, syncedOnKey: syncedOn, cursorKey: cursor, nodes: nodes}
	}
	return stores
}

// IncludeKey is the set of refs a context is included in.
func (s *Store) IncludeKey(hash string) string { return s.prefix + ":big_segment_include:" + hash }

// ExcludeKey is the set of refs a context is excluded from.
func (s *Store) ExcludeKey(hash string) string { return s.prefix + ":big_segment_exclude:" + hash }

// MetadataKeys are the keys of the metadata under prefix: synchronizedOn holds the last
// synchronization time, unix milliseconds as a decimal string; cursor, the synchronizer's
// version of the data, an opaque string that the Relay Proxy sets in the same transaction as
// every change.
func MetadataKeys(prefix string) (synchronizedOn, cursor string) {
	return prefix + ":big_segments_synchronized_on", prefix + ":big_segments_cursor"
}

// Memberships implements segments.Store with one pipeline of two SMEMBERS per hash: one round
// trip for any number of contexts on a standalone server (one per master on a cluster, sent
// concurrently, each on its own: see clusterNodes). A failure of one context's commands (a key
// of the wrong type, a cluster node down) fails that context only.
func (s *Store) Memberships(ctx context.Context, hashes []string) []segments.Read {
	if s.nodes != nil {
		return s.clusterMemberships(ctx, hashes)
	}
	pipe := s.client.Pipeline()
	cmds := make([]*goredis.StringSliceCmd, 2*len(hashes))
	for i, h := range hashes {
		cmds[2*i], cmds[2*i+1] = pipe.SMembers(ctx, s.IncludeKey(h)), pipe.SMembers(ctx, s.ExcludeKey(h))
	}
	if _, err := pipe.Exec(ctx); err != nil && !anyErr(cmds) {
		// The pipeline never ran (go-redis reports a failed connection set-up, such as a
		// rejected password, on Exec only): its commands' empty results mean nothing.
		for _, c := range cmds {
			c.SetErr(fmt.Errorf("pipeline: %w", err))
		}
	}
	reads := make([]segments.Read, len(hashes))
	for i := range hashes {
		reads[i] = membershipOf(cmds[2*i], cmds[2*i+1])
	}
	return reads
}

// membershipOf is the read of a context's include and exclude SMEMBERS.
func membershipOf(include, exclude *goredis.StringSliceCmd) segments.Read {
	inc, err := include.Result()
	if err != nil {
		return segments.Read{Err: fmt.Errorf("smembers include: %w", err)}
	}
	exc, err := exclude.Result()
	if err != nil {
		return segments.Read{Err: fmt.Errorf("smembers exclude: %w", err)}
	}
	return segments.Read{Membership: segments.NewMembership(inc, exc)}
}

func anyErr[C goredis.Cmder](cmds []C) bool {
	for _, c := range cmds {
		if c.Err() != nil {
			return true
		}
	}
	return false
}

// maxSyncedOnBytes bounds the synchronized_on value read: unix milliseconds up to year 9999
// take 15 digits.
const maxSyncedOnBytes = 32

// Metadata implements segments.Store: synchronized_on and the cursor, in one pipeline (on a
// cluster the two keys are in different slots unless the prefix is hash-tagged, so the
// pipeline may go to two nodes, concurrently). A missing synchronized_on key, or 0, means
// never synchronized; a missing cursor means none. A synchronized_on that is not unix
// milliseconds up to year 9999, a value longer than its bound (32 bytes for synchronized_on,
// segments.MaxCursorBytes for the cursor), or a key of the wrong type, is
// segments.ErrInvalidMetadata, since trusting it would hide a broken synchronizer.
//
// A poll reads no more than the bounds of either value, however large it is: GETRANGE reads
// the first bound+1 bytes, STRLEN gives the length for the error. EXISTS tells an empty
// synchronized_on (invalid) from a missing one.
func (s *Store) Metadata(ctx context.Context) (segments.Metadata, error) {
	r := Metadatas(ctx, s)[0]
	return r.Metadata, r.Err
}

// Metadatas reads the metadata of every store (all on one client: the environments of one
// Redis) in one pipeline: one round trip on a standalone server or Sentinel, one to each node
// holding their keys on a cluster, sent concurrently. Each read is as Metadata's.
func Metadatas(ctx context.Context, stores ...*Store) []segments.MetadataRead {
	pipe := stores[0].client.Pipeline()
	polls := make([]metadataPoll, len(stores))
	var all []goredis.Cmder
	for i, s := range stores {
		polls[i] = s.queueMetadata(ctx, pipe)
		all = append(all, polls[i].cmds()...)
	}
	_, execErr := pipe.Exec(ctx)
	stores[0].nodes.observe(ctx, all)
	ran := anyErr(all)
	reads := make([]segments.MetadataRead, len(stores))
	for i, p := range polls {
		if execErr != nil && !ran {
			// The pipeline never ran (go-redis reports a failed connection set-up, such as a
			// rejected password, on Exec only): its commands' empty results mean nothing.
			reads[i].Err = fmt.Errorf("pipeline: %w", execErr)
			continue
		}
		reads[i].Metadata, reads[i].Err = stores[i].parseMetadata(p)
	}
	return reads
}

// metadataPoll is one store's metadata commands in a pipeline.
type metadataPoll struct {
	exists         *goredis.IntCmd
	synced, cursor boundedRead
}

func (p metadataPoll) cmds() []goredis.Cmder {
	return []goredis.Cmder{p.exists, p.synced.length, p.synced.head, p.cursor.length, p.cursor.head}
}

func (s *Store) queueMetadata(ctx context.Context, pipe goredis.Pipeliner) metadataPoll {
	return metadataPoll{exists: pipe.Exists(ctx, s.syncedOnKey), synced: readBounded(ctx, pipe, s.syncedOnKey, maxSyncedOnBytes),
		cursor: readBounded(ctx, pipe, s.cursorKey, segments.MaxCursorBytes)}
}

// parseMetadata is the metadata the commands of p read.
func (s *Store) parseMetadata(p metadataPoll) (segments.Metadata, error) {
	var md segments.Metadata
	v, err := p.synced.value()
	if err != nil {
		return md, err
	}
	if md.Cursor, err = p.cursor.value(); err != nil {
		return md, err
	}
	if err := p.exists.Err(); err != nil {
		return md, fmt.Errorf("exists %s: %w", s.syncedOnKey, err)
	}
	if v == "" && p.exists.Val() == 0 {
		// Missing (a key created between EXISTS and GETRANGE has a value, and is read).
		return md, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 || ms > segments.MaxSynchronizedOnMillis {
		return md, fmt.Errorf("%w: %s holds %.40q, not unix milliseconds", segments.ErrInvalidMetadata, s.syncedOnKey, v)
	}
	if ms > 0 {
		md.LastSynchronized = time.UnixMilli(ms)
	}
	return md, nil
}

// boundedRead reads a string value of at most limit bytes, in a pipeline.
type boundedRead struct {
	key    string
	limit  int64
	length *goredis.IntCmd    // STRLEN: 0 for a missing key
	head   *goredis.StringCmd // GETRANGE of the first limit+1 bytes: "" for a missing key
}

func readBounded(ctx context.Context, pipe goredis.Pipeliner, key string, limit int64) boundedRead {
	return boundedRead{key: key, limit: limit, length: pipe.StrLen(ctx, key), head: pipe.GetRange(ctx, key, 0, limit)}
}

// value is the value read, "" for a missing key. Whether it is too long is decided on the
// bytes GETRANGE read, not on STRLEN, so that a value replaced between the two commands is
// judged by what was read; STRLEN only gives the length for the error.
func (r boundedRead) value() (string, error) {
	for _, cmd := range []goredis.Cmder{r.length, r.head} {
		err := cmd.Err()
		switch {
		case goredis.HasErrorPrefix(err, "WRONGTYPE"):
			return "", fmt.Errorf("%w: %s %s: %w", segments.ErrInvalidMetadata, cmd.Name(), r.key, err)
		case err != nil:
			return "", fmt.Errorf("%s %s: %w", cmd.Name(), r.key, err)
		}
	}
	v := r.head.Val()
	if int64(len(v)) > r.limit {
		return "", fmt.Errorf("%w: %s holds %d bytes, more than %d", segments.ErrInvalidMetadata, r.key, max(r.length.Val(), int64(len(v))), r.limit)
	}
	return v, nil
}
