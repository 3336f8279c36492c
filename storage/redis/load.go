package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/storage/fixture"
)

// LoadOptions tune Load.
type LoadOptions struct {
	// Replace makes Redis match the contexts given: refs they no longer list are removed, and
	// so are the sets of every context under the prefix that is not given. Without it, Load
	// only adds.
	Replace bool
	// SynchronizedOn is written as the synchronization time once every context is written;
	// the zero time is written as 0, never synchronized.
	SynchronizedOn time.Time
	// Cursor is written as the data's version with the synchronization time, so that every
	// instance reading the store sees the load as a change at its next poll; empty means a new
	// one, "load-<unix ms>-<random>".
	Cursor string
	// BatchSize is how many contexts go in one pipeline; 0 means 1000.
	BatchSize int
	// Progress, when set, is called after each batch with the contexts written so far.
	Progress func(done, total int)
}

// LoadStats counts what Load did.
type LoadStats struct {
	Contexts     int // contexts written
	RefsAdded    int // refs added to sets (already present ones are not counted)
	RefsRemoved  int // refs removed from listed contexts (Replace)
	KeysDeleted  int // sets of unlisted contexts deleted (Replace)
	SyncedOnMsec int64
	Cursor       string
}

// Load writes contexts in the LaunchDarkly Big Segments layout, then the synchronization
// time, for demos, tests and migrations. It is idempotent. Nothing relies on transactions,
// which Redis Cluster cannot run across slots (a context's two sets are in different slots):
// additions are written before removals, so a reader during a load sees a context's old refs,
// its new ones, or both, never neither.
func (s *Store) Load(ctx context.Context, contexts []fixture.Context, opts LoadOptions) (LoadStats, error) {
	batch := opts.BatchSize
	if batch <= 0 {
		batch = 1000
	}
	var st LoadStats
	listed := make(map[string]struct{}, len(contexts))
	for start := 0; start < len(contexts); start += batch {
		chunk := contexts[start:min(start+batch, len(contexts))]
		if err := s.loadBatch(ctx, chunk, opts.Replace, &st); err != nil {
			return st, err
		}
		for _, c := range chunk {
			listed[c.Hash] = struct{}{}
		}
		st.Contexts += len(chunk)
		if opts.Progress != nil {
			opts.Progress(st.Contexts, len(contexts))
		}
	}
	if opts.Replace {
		n, err := s.deleteUnlisted(ctx, listed)
		st.KeysDeleted = n
		if err != nil {
			return st, err
		}
	}
	if !opts.SynchronizedOn.IsZero() {
		st.SyncedOnMsec = opts.SynchronizedOn.UnixMilli()
	}
	st.Cursor = opts.Cursor
	if st.Cursor == "" {
		st.Cursor = newCursor()
	}
	// After every context: no instance sees the new cursor before the data it stands for.
	// One MULTI/EXEC, but on a cluster, where the two keys are in different slots unless the
	// prefix is hash-tagged: there, a pipeline.
	write := s.client.TxPipelined
	if _, cluster := s.client.(*goredis.ClusterClient); cluster {
		write = s.client.Pipelined
	}
	_, err := write(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, s.cursorKey, st.Cursor, 0)
		p.Set(ctx, s.syncedOnKey, strconv.FormatInt(st.SyncedOnMsec, 10), 0)
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("set %s and %s: %w", s.cursorKey, s.syncedOnKey, err)
	}
	return st, nil
}

// newCursor makes up a version for a load: when, and a random part, so that two loads in the
// same millisecond still differ.
func newCursor() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("load-%d-%s", time.Now().UnixMilli(), hex.EncodeToString(b[:]))
}

func (s *Store) loadBatch(ctx context.Context, chunk []fixture.Context, replace bool, st *LoadStats) error {
	// With Replace, read what is there first, to know what to remove.
	var current []*goredis.StringSliceCmd
	if replace {
		pipe := s.client.Pipeline()
		current = make([]*goredis.StringSliceCmd, 2*len(chunk))
		for i, c := range chunk {
			current[2*i] = pipe.SMembers(ctx, s.IncludeKey(c.Hash))
			current[2*i+1] = pipe.SMembers(ctx, s.ExcludeKey(c.Hash))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("read current memberships: %w", err)
		}
	}
	pipe := s.client.Pipeline()
	var adds, removes []*goredis.IntCmd
	for i, c := range chunk {
		for j, set := range [][]string{c.Included, c.Excluded} {
			key := s.IncludeKey(c.Hash)
			if j == 1 {
				key = s.ExcludeKey(c.Hash)
			}
			if len(set) > 0 {
				adds = append(adds, pipe.SAdd(ctx, key, anys(set)...))
			}
			if replace {
				if extra := missing(current[2*i+j].Val(), set); len(extra) > 0 {
					removes = append(removes, pipe.SRem(ctx, key, anys(extra)...))
				}
			}
		}
	}
	if len(adds)+len(removes) == 0 {
		return nil
	}
	// Additions come first in the pipeline; on a cluster, commands for one node keep their
	// order, and a context's additions and removals of one set are for the same node.
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("write memberships: %w", err)
	}
	for _, c := range adds {
		st.RefsAdded += int(c.Val())
	}
	for _, c := range removes {
		st.RefsRemoved += int(c.Val())
	}
	return nil
}

// deleteUnlisted deletes the include and exclude sets of every context under the prefix
// that is not in listed, scanning every master of a cluster.
func (s *Store) deleteUnlisted(ctx context.Context, listed map[string]struct{}) (int, error) {
	include, exclude := s.IncludeKey(""), s.ExcludeKey("")
	var mu sync.Mutex // cluster masters are scanned concurrently
	deleted := 0
	scan := func(ctx context.Context, c goredis.Cmdable) error {
		for _, prefix := range []string{include, exclude} {
			iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 1000).Iterator()
			var stale []string
			for iter.Next(ctx) {
				if _, ok := listed[strings.TrimPrefix(iter.Val(), prefix)]; !ok {
					stale = append(stale, iter.Val())
				}
			}
			if err := iter.Err(); err != nil {
				return fmt.Errorf("scan %s*: %w", prefix, err)
			}
			// One DEL per key (keys of a cluster may be in any slot), pipelined.
			for start := 0; start < len(stale); start += 1000 {
				pipe := s.client.Pipeline()
				for _, k := range stale[start:min(start+1000, len(stale))] {
					pipe.Del(ctx, k)
				}
				cmds, err := pipe.Exec(ctx)
				if err != nil {
					return fmt.Errorf("delete sets of unlisted contexts: %w", err)
				}
				mu.Lock()
				for _, c := range cmds {
					deleted += int(c.(*goredis.IntCmd).Val())
				}
				mu.Unlock()
			}
		}
		return nil
	}
	if cc, ok := s.client.(*goredis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, master *goredis.Client) error {
			return scan(ctx, master)
		})
		return deleted, err
	}
	return deleted, scan(ctx, s.client)
}

// escapeGlob escapes SCAN MATCH's special characters, so a prefix is matched literally.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// missing returns the members of have that want does not list.
func missing(have, want []string) []string {
	keep := make(map[string]struct{}, len(want))
	for _, w := range want {
		keep[w] = struct{}{}
	}
	var out []string
	for _, h := range have {
		if _, ok := keep[h]; !ok {
			out = append(out, h)
		}
	}
	return out
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
