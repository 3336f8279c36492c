package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/internal/storetest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/redis"
)

func TestScanContract(t *testing.T) {
	c := redistest.Client(t)
	storetest.RunScan(t, func(t *testing.T, s storetest.Seed) storetest.Scanner {
		store := redis.New(c, redistest.Prefix(t, c))
		seed(t, c, store, s)
		return store
	})
}

// On a cluster, keys are on every master (the include and exclude keys of one context often
// on two), unless the prefix is hash-tagged.
func TestScanCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client(t)
	for _, tagged := range []bool{false, true} {
		t.Run(fmt.Sprint("hash-tagged=", tagged), func(t *testing.T) {
			storetest.RunScan(t, func(t *testing.T, s storetest.Seed) storetest.Scanner {
				prefix := redistest.Prefix(t, client)
				if tagged {
					prefix = "{" + prefix + "}"
				}
				store := redis.New(client, prefix)
				seed(t, client, store, s)
				return store
			})
		})
	}
}

func TestScanSentinel(t *testing.T) {
	t.Parallel()
	set := redistest.StartSentinel(t, "bigsegscan")
	client, err := redis.NewClient(redis.ClientOptions{SentinelURL: set.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	storetest.RunScan(t, func(t *testing.T, s storetest.Seed) storetest.Scanner {
		store := redis.New(client, redistest.Prefix(t, client))
		seed(t, client, store, s)
		return store
	})
}

// A key of the layout that is not a set, or a ref that is not UTF-8, fails the scan: what
// Redis holds is not what the synchronizer writes, and counts of it would mislead.
func TestScanInvalidDataFails(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		write func(store *redis.Store, h string)
	}{
		{"include key a string", func(s *redis.Store, h string) { c.Set(ctx, s.IncludeKey(h), "beta.g1", 0) }},
		{"exclude key a hash", func(s *redis.Store, h string) {
			c.SAdd(ctx, s.IncludeKey(h), "beta.g1")
			c.HSet(ctx, s.ExcludeKey(h), "f", "v")
		}},
		{"exclude key a list, no include key", func(s *redis.Store, h string) { c.RPush(ctx, s.ExcludeKey(h), "beta.g1") }},
		{"included ref not UTF-8", func(s *redis.Store, h string) { c.SAdd(ctx, s.IncludeKey(h), "beta\xff.g1") }},
		{"excluded ref not UTF-8, no include key", func(s *redis.Store, h string) { c.SAdd(ctx, s.ExcludeKey(h), "\xc3(") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := redis.New(c, redistest.Prefix(t, c))
			seed(t, c, store, storetest.ScanSeed(20))
			tt.write(store, segments.Hash("bad"))
			err := store.Scan(ctx, func(int) error { return nil }, func(string, segments.Membership) error { return nil })
			if !errors.Is(err, segments.ErrInvalidData) {
				t.Errorf("Scan = %v, want ErrInvalidData", err)
			}
		})
	}
}

// A prefix with characters SCAN's MATCH gives a meaning to scans its own keys only.
func TestScanPrefixIsLiteral(t *testing.T) {
	c := redistest.Client(t)
	base := redistest.Prefix(t, c)
	stores := map[string]*redis.Store{}
	// "\xff" is not UTF-8: the pattern must keep its bytes.
	for _, p := range []string{"*", "?", "[x]", `\`, "x", "xx", "\xff", "\xff*"} {
		stores[p] = redis.New(c, base+":"+p)
		seed(t, c, stores[p], storetest.Seed{Contexts: map[string]storetest.Entry{segments.Hash(p): {Included: []string{fmt.Sprintf("%x.g1", p)}}}})
	}
	for p, store := range stores {
		got := storetest.Scanned(t, store)
		want := map[string]map[string]bool{segments.Hash(p): {fmt.Sprintf("%x.g1", p): true}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("prefix %q (-want +got):\n%s", p, diff)
		}
	}
}

// keysHook records the keys of every command sent, and the largest pipeline.
type keysHook struct {
	mu      sync.Mutex
	keys    []string
	largest int
	calls   int
}

func (h *keysHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *keysHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error { h.record(cmd); return next(ctx, cmd) }
}
func (h *keysHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.record(cmds...)
		return next(ctx, cmds)
	}
}

func (h *keysHook) record(cmds ...goredis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	h.largest = max(h.largest, len(cmds))
	for _, c := range cmds {
		if args := c.Args(); len(args) > 1 && !slices.Contains([]string{"hello", "client", "scan"}, c.Name()) {
			h.keys = append(h.keys, fmt.Sprint(args[1]))
		}
	}
}

// Describe names exactly the keys a read of the hash sends commands to, in the order of the
// read, and data written at them is what the read answers.
func TestDescribeNamesTheKeysRead(t *testing.T) {
	opts, _ := goredis.ParseURL(redistest.URL(t))
	c := goredis.NewClient(opts)
	defer c.Close()
	prefix := redistest.Prefix(t, c)
	store := redis.New(c, prefix)
	ctx := context.Background()
	h := segments.Hash("alice")
	view := store.Describe(h)
	if view.Kind != "redis" || view.Prefix != prefix || view.Table != "" || len(view.Keys) != 2 {
		t.Fatalf("Describe = %+v", view)
	}
	c.SAdd(ctx, view.Keys[0], "in.g1")
	c.SAdd(ctx, view.Keys[1], "out.g1")
	hook := &keysHook{}
	c.AddHook(hook)
	r := store.Memberships(ctx, []string{h})[0]
	if diff := cmp.Diff(map[string]bool{"in.g1": true, "out.g1": false}, storetest.Map(r.Membership)); r.Err != nil || diff != "" {
		t.Errorf("read of the keys Describe names: %v (-want +got):\n%s", r.Err, diff)
	}
	if diff := cmp.Diff(view.Keys, hook.keys); diff != "" {
		t.Errorf("keys read (-described +read):\n%s", diff)
	}
	if v := redis.New(c, "").Describe(h); v.Prefix != redis.DefaultPrefix || !strings.HasPrefix(v.Keys[0], redis.DefaultPrefix+":") {
		t.Errorf("no prefix: Describe = %+v, want the default prefix as stored", v)
	}
}

// A scan holds a page of contexts at a time: its pipelines stay within a few pages' commands
// however many contexts there are.
func TestScanReadsPages(t *testing.T) {
	opts, _ := goredis.ParseURL(redistest.URL(t))
	c := goredis.NewClient(opts)
	defer c.Close()
	store := redis.New(c, redistest.Prefix(t, c))
	s := storetest.ScanSeed(1500)
	seed(t, c, store, s)
	hook := &keysHook{}
	c.AddHook(hook)
	if diff := cmp.Diff(storetest.Want(s), storetest.Scanned(t, store)); diff != "" {
		t.Fatalf("scanned (-want +got):\n%s", diff)
	}
	// A page is 100 contexts or more (what the SCANs that filled it returned), two commands each.
	if hook.largest > 2*2*100 {
		t.Errorf("largest pipeline: %d commands, want at most 400", hook.largest)
	}
	if hook.calls < 1500/200 {
		t.Errorf("%d calls for 1,500 contexts: fewer than pages can be", hook.calls)
	}
}
