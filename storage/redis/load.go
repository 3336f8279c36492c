package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/segments"
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
	// Cursor is the data's version, written with the synchronization time so that every
	// instance reading the store sees the load as a change at its next poll (and drops its
	// cached answers), unless it is the stored one already. Empty means a new one,
	// "load-<unix ms>-<random>", if the load changed anything, and the stored one kept if it
	// did not.
	Cursor string
	// BatchSize is how many contexts go in one pipeline; 0 means 1000.
	BatchSize int
	// Progress, when set, is told how far Load has got: after each batch while Writing,
	// after each page of keys scanned and each pipeline of deletions while Deleting, with Done
	// on the last report of each phase. It is called on the loading goroutines one at a time,
	// so it should be quick; throttling what it shows is its own business.
	Progress func(Progress)
}

// LoadStats counts what Load did.
type LoadStats struct {
	Contexts     int // contexts written
	RefsAdded    int // refs added to sets (already present ones are not counted)
	RefsRemoved  int // refs removed from listed contexts (Replace)
	KeysDeleted  int // sets of unlisted contexts deleted (Replace)
	SyncedOnMsec int64
	// Cursor is the cursor stored once Load is done ("" for none), and CursorChanged says
	// whether Load wrote it: when it did, running instances drop their cached answers.
	Cursor        string
	CursorChanged bool
}

// Changed says whether Load changed any membership.
func (st LoadStats) Changed() bool { return st.RefsAdded+st.RefsRemoved+st.KeysDeleted > 0 }

// Phase is a phase of Load, as Progress tells it.
type Phase int

const (
	// Writing writes the contexts given, a batch at a time: their refs are added and, with
	// Replace, the refs they no longer list are removed.
	Writing Phase = iota
	// Deleting (Replace only) scans the keys under the prefix, and deletes the sets of the
	// contexts not given.
	Deleting
)

// Progress is how far Load has got, as LoadOptions.Progress is told.
type Progress struct {
	Phase Phase
	// Done is set on the last report of a phase, once the phase has succeeded.
	Done bool
	// Total is how many contexts were given.
	Total int
	// Scanned counts the keys Deleting has looked at.
	Scanned int
	// LoadStats counts what has been done so far (its Cursor and SyncedOnMsec are not set yet).
	LoadStats
}

// Load writes contexts in the LaunchDarkly Big Segments layout, then the synchronization
// time and, if the data changed, a cursor, for demos, tests and migrations. It is idempotent,
// and a load that changes nothing keeps the cursor, so that running instances keep their
// cached answers. Nothing relies on transactions, which Redis Cluster cannot run across slots
// (a context's two sets are in different slots): additions are written before removals, so a
// reader during a load sees a context's old refs, its new ones, or both, never neither.
func (s *Store) Load(ctx context.Context, contexts []fixture.Context, opts LoadOptions) (LoadStats, error) {
	batch := opts.BatchSize
	if batch <= 0 {
		batch = 1000
	}
	report := func(p Progress) {
		if opts.Progress != nil {
			p.Total = len(contexts)
			opts.Progress(p)
		}
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
		report(Progress{Phase: Writing, Done: st.Contexts == len(contexts), LoadStats: st})
	}
	if len(contexts) == 0 {
		report(Progress{Phase: Writing, Done: true})
	}
	if opts.Replace {
		err := s.deleteUnlisted(ctx, listed, func(scanned, deleted int, done bool) {
			st.KeysDeleted = deleted
			report(Progress{Phase: Deleting, Done: done, Scanned: scanned, LoadStats: st})
		})
		if err != nil {
			return st, err
		}
	}
	if !opts.SynchronizedOn.IsZero() {
		st.SyncedOnMsec = opts.SynchronizedOn.UnixMilli()
	}
	return st, s.writeMetadata(ctx, &st, opts.Cursor)
}

// writeMetadata writes the cursor (the one given, or a new one when the load changed anything and
// none was given) and the synchronization time of st.
func (s *Store) writeMetadata(ctx context.Context, st *LoadStats, cursor string) error {
	stored, err := s.storedCursor(ctx)
	if err != nil {
		return err
	}
	st.Cursor = cursor
	switch {
	case st.Cursor == "" && !st.Changed() && stored != nil:
		st.Cursor = *stored // nothing to tell the instances
	case st.Cursor == "":
		st.Cursor = newCursor()
	}
	st.CursorChanged = stored == nil || st.Cursor != *stored
	syncedOn := strconv.FormatInt(st.SyncedOnMsec, 10)
	if !st.CursorChanged {
		if err := s.client.Set(ctx, s.syncedOnKey, syncedOn, 0).Err(); err != nil {
			return fmt.Errorf("set %s: %w", s.syncedOnKey, err)
		}
		return nil
	}
	// After every context: no instance sees the new cursor before the data it stands for.
	// One MULTI/EXEC, but on a cluster, where the two keys are in different slots unless the
	// prefix is hash-tagged: there, a pipeline.
	write := s.client.TxPipelined
	if _, cluster := s.client.(*goredis.ClusterClient); cluster {
		write = s.client.Pipelined
	}
	_, err = write(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, s.cursorKey, st.Cursor, 0)
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
// that is not in listed, scanning every master of a cluster, and reports the keys scanned
// and deleted after each page of the scan and each pipeline of deletions (one report at a
// time), then once more with done once all are deleted.
func (s *Store) deleteUnlisted(ctx context.Context, listed map[string]struct{}, report func(scanned, deleted int, done bool)) error {
	p := &pruner{s: s, listed: listed, report: report}
	var err error
	if cc, ok := s.client.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, master *goredis.Client) error {
			return p.scan(ctx, master)
		})
	} else {
		err = p.scan(ctx, s.client)
	}
	if err != nil {
		return err
	}
	report(p.scanned, p.deleted, true)
	return nil
}

// pruner deletes the sets of contexts that are not listed, counting what it scans and deletes.
type pruner struct {
	s      *Store
	listed map[string]struct{}
	report func(scanned, deleted int, done bool)

	mu               sync.Mutex // cluster masters are scanned concurrently
	scanned, deleted int
}

func (p *pruner) count(keys, dels int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scanned, p.deleted = p.scanned+keys, p.deleted+dels
	p.report(p.scanned, p.deleted, false)
}

// del deletes keys, one DEL per key (keys of a cluster may be in any slot), pipelined.
func (p *pruner) del(ctx context.Context, keys []string) error {
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

// scan deletes the unlisted include and exclude sets that c holds.
func (p *pruner) scan(ctx context.Context, c goredis.Cmdable) error {
	for _, prefix := range []string{p.s.IncludeKey(""), p.s.ExcludeKey("")} {
		// Deleting while scanning is safe: SCAN returns every key that is there from its
		// start to its end, and deleting keys does not make it skip others.
		var stale []string
		for cursor := uint64(0); ; {
			keys, next, err := c.Scan(ctx, cursor, escapeGlob(prefix)+"*", 1000).Result()
			if err != nil {
				return fmt.Errorf("scan %s*: %w", prefix, err)
			}
			for _, k := range keys {
				if _, ok := p.listed[strings.TrimPrefix(k, prefix)]; !ok {
					stale = append(stale, k)
				}
			}
			p.count(len(keys), 0)
			cursor = next
			if len(stale) > 0 && (cursor == 0 || len(stale) >= 1000) {
				if err := p.del(ctx, stale); err != nil {
					return err
				}
				stale = stale[:0]
			}
			if cursor == 0 {
				break
			}
		}
	}
	return nil
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
