package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/segments"
)

// scanPage is how many contexts a scan reads in one pipeline (and the COUNT hint of each
// SCAN): what a scan holds in memory at once, whatever the number of contexts stored.
const scanPage = 100

// keyScanner is a client SCAN can be sent to: a standalone server, Sentinel's master, or one
// master of a cluster.
type keyScanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *goredis.ScanCmd
}

// Scan is the inventory's scan in one walk of every master (the server itself, or every
// master of a cluster, one after another) for the prefix's include and exclude keys. The
// contexts of include keys are read with both their sets, a page of contexts per pipeline; an
// exclude key's context is read (EXISTS of its include key, and its exclude set) and emitted
// only if it has no include key, as its include key's emits it. Each context is emitted once,
// with both its sets, when nothing writes meanwhile. SCAN may return a key twice (while Redis
// rehashes), and a context written during the walk may be seen twice or not at all: a scan
// during writes may count a context twice, or miss it. A context with no refs (a set emptied
// since SCAN found it) is not emitted.
//
// SCAN's MATCH filters the keys after it examined them: each reply examines about scanPage
// keys of the whole database, the prefix's or not. So walked is called after each reply with
// the keys it stepped over without a context to emit (scanPage less its include keys): the
// inventory's pace counts the keys the walk examines, not the contexts alone.
//
// A key under the prefix's layout that is not a set, or a ref that is not valid UTF-8, fails
// the scan with segments.ErrInvalidData; a failed command fails it too. Every command is bounded
// by the client's timeouts and ctx; no connection is held while each runs.
func (s *Store) Scan(ctx context.Context, walked func(skipped int) error, each func(hash string, m segments.Membership) error) error {
	incPrefix, excPrefix := s.IncludeKey(""), s.ExcludeKey("")
	included := make([]string, 0, 2*scanPage)
	excluded := make([]string, 0, 2*scanPage)
	flush := func(hashes *[]string, include bool, least int) error {
		if len(*hashes) < least || len(*hashes) == 0 {
			return nil
		}
		defer func() { *hashes = (*hashes)[:0] }()
		return s.emitPage(ctx, *hashes, include, each)
	}
	err := s.forEachKey(ctx, s.prefix+":big_segment_", scanPage, func(keys []string) error {
		n := len(included)
		for _, k := range keys {
			if h, ok := strings.CutPrefix(k, incPrefix); ok {
				included = append(included, h)
			} else if h, ok := strings.CutPrefix(k, excPrefix); ok {
				excluded = append(excluded, h)
			}
		}
		if err := walked(max(0, scanPage-(len(included)-n))); err != nil {
			return err
		}
		if err := flush(&included, true, scanPage); err != nil {
			return err
		}
		return flush(&excluded, false, scanPage)
	})
	if err == nil {
		err = flush(&included, true, 0)
	}
	if err == nil {
		err = flush(&excluded, false, 0)
	}
	return err
}

// forEachKey SCANs every master (the server itself, or each master of a cluster in turn) for
// the keys that begin with prefix, byte for byte, and calls page with the keys of each reply:
// perhaps none, and perhaps a key an earlier reply gave (SCAN's guarantee is only that a key
// there from the start to the end of the walk is given at least once). Deleting keys while
// walking is safe: it does not make SCAN skip others. The scan and load --replace both walk
// with it.
func (s *Store) forEachKey(ctx context.Context, prefix string, count int64, page func(keys []string) error) error {
	masters, err := s.masters(ctx)
	if err != nil {
		return err
	}
	match := globEscape(prefix) + "*"
	for _, m := range masters {
		for cursor := uint64(0); ; {
			keys, next, err := m.Scan(ctx, cursor, match, count).Result()
			if err != nil {
				return fmt.Errorf("scan %s: %w", match, err)
			}
			if err := page(keys); err != nil {
				return err
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return nil
}

// masters are the clients to SCAN: every master of a cluster, else the client itself.
func (s *Store) masters(ctx context.Context) ([]keyScanner, error) {
	cc, ok := s.client.(*goredis.ClusterClient)
	if !ok {
		return []keyScanner{s.client}, nil
	}
	var mu sync.Mutex
	var masters []keyScanner
	err := cc.ForEachMaster(ctx, func(_ context.Context, m *goredis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the cluster's masters: %w", err)
	}
	return masters, nil
}

// scanned is one context of a page, as read.
type scanned struct {
	hash string
	m    segments.Membership
}

// emitPage reads the contexts of hashes in one pipeline, then calls each for every one to
// emit: on the include pass, those whose include set has refs; on the exclude pass, those with
// no include key.
func (s *Store) emitPage(ctx context.Context, hashes []string, include bool, each func(string, segments.Membership) error) error {
	pipe := s.client.Pipeline()
	first := make([]goredis.Cmder, len(hashes)) // SMEMBERS include, or EXISTS include
	excluded := make([]*goredis.StringSliceCmd, len(hashes))
	for i, h := range hashes {
		if include {
			first[i] = pipe.SMembers(ctx, s.IncludeKey(h))
		} else {
			first[i] = pipe.Exists(ctx, s.IncludeKey(h))
		}
		excluded[i] = pipe.SMembers(ctx, s.ExcludeKey(h))
	}
	if _, err := pipe.Exec(ctx); err != nil && !anyErr(first) && !anyErr(excluded) {
		return fmt.Errorf("scan: pipeline: %w", err) // it never ran: its empty results mean nothing
	}
	page := make([]scanned, 0, len(hashes))
	for i, h := range hashes {
		var inc []string
		switch c := first[i].(type) {
		case *goredis.StringSliceCmd:
			if inc = c.Val(); len(inc) == 0 && c.Err() == nil {
				continue // gone since SCAN: the exclude pass sees it if it has excluded refs
			}
		case *goredis.IntCmd:
			if c.Val() > 0 && c.Err() == nil {
				continue // the include pass emitted it
			}
		}
		exc, err := setOf(first[i], excluded[i])
		if err != nil {
			return err
		}
		if len(inc)+len(exc) > 0 {
			page = append(page, scanned{h, segments.NewMembership(inc, exc)})
		}
	}
	for _, c := range page {
		if err := each(c.hash, c.m); err != nil {
			return err
		}
	}
	return nil
}

// setOf checks a context's commands: first's error, and excluded's, and that every ref read
// is valid UTF-8; it returns the excluded refs.
func setOf(first goredis.Cmder, excluded *goredis.StringSliceCmd) ([]string, error) {
	for _, c := range []goredis.Cmder{first, excluded} {
		key, _ := c.Args()[1].(string)
		err := c.Err()
		switch {
		case goredis.HasErrorPrefix(err, "WRONGTYPE"):
			return nil, fmt.Errorf("scan: %w: %s is not a set: %w", segments.ErrInvalidData, key, err)
		case err != nil:
			return nil, fmt.Errorf("scan: %s of a page: %w", c.Name(), err) // no key: a hash is logged only where it helps
		}
		if ss, ok := c.(*goredis.StringSliceCmd); ok {
			for _, r := range ss.Val() {
				if !utf8.ValidString(r) {
					return nil, fmt.Errorf("scan: %w: %s holds a ref that is not valid UTF-8: %q", segments.ErrInvalidData, key, r)
				}
			}
		}
	}
	return excluded.Val(), nil
}

// globEscape escapes the characters SCAN's MATCH pattern gives a meaning to, so that the
// pattern matches the prefix as written. It works on bytes, not runes: a prefix that is not
// valid UTF-8 stays the same bytes (a range over runes would write U+FFFD instead).
func globEscape(s string) string {
	var b strings.Builder
	for i := range len(s) {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Describe is how explain and /status name the store: the store's prefix, and the two keys a read of hash
// reads (the include set, then the exclude set).
func (s *Store) Describe(hash string) segments.StoreView {
	v := segments.StoreView{Kind: "redis", Prefix: s.prefix}
	if hash != "" {
		v.Keys = []string{s.IncludeKey(hash), s.ExcludeKey(hash)}
	}
	return v
}
