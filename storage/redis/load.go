package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
)

// Load writes contexts into Redis in the LaunchDarkly Big Segments layout (see fixture.Load),
// in pipelines of opts.BatchSize contexts. Nothing relies on transactions, which Redis
// Cluster cannot run across slots (a context's two sets are in different slots): additions are
// written before removals, so a reader during a load sees a context's old refs, its new ones,
// or both, never neither. With Replace, unlisted contexts' sets are found by SCAN, on every
// master of a cluster.
func (s *Store) Load(ctx context.Context, contexts []fixture.Context, opts fixture.LoadOptions) (fixture.LoadStats, error) {
	return fixture.Load(ctx, loader{s, opts.DryRun}, contexts, opts)
}

// loader is a Store as fixture.Load writes into it; with dryRun, it only counts.
type loader struct {
	s      *Store
	dryRun bool
}

func (l loader) WriteBatch(ctx context.Context, batch []fixture.Context, replace bool, st *fixture.LoadStats) error {
	return l.s.loadBatch(ctx, batch, replace, l.dryRun, st)
}

func (l loader) DeleteUnlisted(ctx context.Context, listed map[string]struct{}, st *fixture.LoadStats, progress func(scanned int, done bool)) error {
	return l.s.deleteUnlisted(ctx, listed, l.dryRun, func(scanned, deleted int, done bool) {
		st.Deleted = deleted
		progress(scanned, done)
	})
}

func (l loader) StoredCursor(ctx context.Context) (*string, error) { return l.s.storedCursor(ctx) }

// WriteMetadata writes the synchronization time and, if it changed, the cursor: one MULTI/EXEC,
// but on a cluster, where the two keys are in different slots unless the prefix is
// hash-tagged, a pipeline.
func (l loader) WriteMetadata(ctx context.Context, syncedOnMsec int64, cursor string, cursorChanged bool) error {
	s := l.s
	syncedOn := strconv.FormatInt(syncedOnMsec, 10)
	if !cursorChanged {
		if err := s.client.Set(ctx, s.syncedOnKey, syncedOn, 0).Err(); err != nil {
			return fmt.Errorf("set %s: %w", s.syncedOnKey, err)
		}
		return nil
	}
	write := s.client.TxPipelined
	if _, cluster := s.client.(*goredis.ClusterClient); cluster {
		write = s.client.Pipelined
	}
	_, err := write(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, s.cursorKey, cursor, 0)
		p.Set(ctx, s.syncedOnKey, syncedOn, 0)
		return nil
	})
	if err != nil {
		return fmt.Errorf("set %s and %s: %w", s.cursorKey, s.syncedOnKey, err)
	}
	return nil
}

// storedCursor returns the cursor stored, "" for none, or nil when the key holds something no
// instance takes for a cursor (too long, or not a string), which a load replaces.
func (s *Store) storedCursor(ctx context.Context) (*string, error) {
	pipe := s.client.Pipeline()
	r := readBounded(ctx, pipe, s.cursorKey, segments.MaxCursorBytes)
	_, _ = pipe.Exec(ctx) // each command's error is read by value
	v, err := r.value()
	switch {
	case errors.Is(err, segments.ErrInvalidMetadata):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read the stored cursor: %w", err)
	}
	return &v, nil
}

// loadBatch writes the contexts of chunk in one pipeline (reading their sets first, with
// replace, to know what to remove; with dryRun, to count what would change, and no more).
func (s *Store) loadBatch(ctx context.Context, chunk []fixture.Context, replace, dryRun bool, st *fixture.LoadStats) error {
	var current []*goredis.StringSliceCmd
	if replace || dryRun {
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
	if dryRun {
		for i, c := range chunk {
			for j, set := range [][]string{c.Included, c.Excluded} {
				have := current[2*i+j].Val()
				st.RefsAdded += len(missing(dedupe(set), have))
				if replace {
					st.RefsRemoved += len(missing(have, set))
				}
			}
		}
		return nil
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
// that is not in listed, scanning every master of a cluster, and reports the keys scanned
// and deleted after each page of the scan and each pipeline of deletions, then once more with
// done once all are deleted.
func (s *Store) deleteUnlisted(ctx context.Context, listed map[string]struct{}, dryRun bool, report func(scanned, deleted int, done bool)) error {
	p := &pruner{s: s, report: report}
	if dryRun {
		p.seen = map[string]struct{}{}
	}
	for _, prefix := range []string{s.IncludeKey(""), s.ExcludeKey("")} {
		var stale []string
		err := s.forEachKey(ctx, prefix, 1000, func(keys []string) error {
			for _, k := range keys {
				if _, ok := listed[strings.TrimPrefix(k, prefix)]; !ok {
					stale = append(stale, k)
				}
			}
			p.count(len(keys), 0)
			if len(stale) < 1000 {
				return nil
			}
			defer func() { stale = stale[:0] }()
			return p.del(ctx, stale)
		})
		if err == nil && len(stale) > 0 {
			err = p.del(ctx, stale)
		}
		if err != nil {
			return err
		}
	}
	report(p.scanned, p.deleted, true)
	return nil
}

// pruner deletes the sets of contexts that are not listed, counting what it scans and deletes.
type pruner struct {
	s      *Store
	report func(scanned, deleted int, done bool)

	seen map[string]struct{} // a dry run's: the keys it would delete (SCAN may return one twice)

	scanned, deleted int
}

func (p *pruner) count(keys, dels int) {
	p.scanned, p.deleted = p.scanned+keys, p.deleted+dels
	p.report(p.scanned, p.deleted, false)
}

// del deletes keys, one DEL per key (keys of a cluster may be in any slot), pipelined; a dry
// run counts them.
func (p *pruner) del(ctx context.Context, keys []string) error {
	if p.seen != nil {
		n := 0
		for _, k := range keys {
			if _, ok := p.seen[k]; !ok {
				p.seen[k] = struct{}{}
				n++
			}
		}
		p.count(0, n)
		return nil
	}
	pipe := p.s.client.Pipeline()
	for _, k := range keys {
		pipe.Del(ctx, k)
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		return fmt.Errorf("delete sets of unlisted contexts: %w", err)
	}
	n := 0
	for _, c := range cmds {
		n += int(c.(*goredis.IntCmd).Val())
	}
	p.count(0, n)
	return nil
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

// dedupe is refs without repeats, as a set holds them.
func dedupe(refs []string) []string { return slices.Compact(slices.Sorted(slices.Values(refs))) }

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
