package inventory

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/memory"
	"github.com/bigseg/bigseg/storage/redis"
)

// The stores the loop scans, and those that share a scan (a type assertion finds them at run
// time: a method missing would make a store silently unscanned, or scanned by every replica).
var (
	_ Scanner = (*memory.Store)(nil)
	_ Fleet   = (*redis.Store)(nil)
	_ Scanner = (*redis.Store)(nil)
	_ Fleet   = (*dynamodb.Store)(nil)
	_ Scanner = (*dynamodb.Store)(nil)
)

// scanCount counts the SCAN commands a Redis client sends.
type scanCount struct {
	mu sync.Mutex
	n  int
}

func (h *scanCount) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *scanCount) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}
func (h *scanCount) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "scan" {
			h.mu.Lock()
			h.n++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// TestRedisScanPacesItsWalk: SCAN walks every key of the database, and MATCH filters after:
// the keys a scan steps over (here 5,000 of other data beside 3 contexts) are paced at the
// rate as contexts are, each SCAN reply one read at least, so a walk over other keys does not
// run back to back. The clock's sleeps pass at once: the time the scan took is what it slept.
func TestRedisScanPacesItsWalk(t *testing.T) {
	const others, contexts, perSecond = 5000, 3, 1000
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	store := redis.New(c, prefix)
	pipe := c.Pipeline()
	for i := range others {
		pipe.Set(t.Context(), fmt.Sprintf("%s:other:%d", prefix, i), "x", 0)
	}
	for i := range contexts {
		pipe.SAdd(t.Context(), store.IncludeKey(segments.Hash(fmt.Sprint(i))), "a.g1")
	}
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	scans := &scanCount{}
	c.AddHook(scans)
	inv, err := scan(t.Context(), environmentWithPrefix(t, "production", prefix, store), store, perSecond, newFakeClock().clock(), nil, nil)
	if err != nil || inv.Contexts != contexts {
		t.Fatalf("scan: %d contexts, %v; want %d", inv.Contexts, err, contexts)
	}
	took := inv.FinishedAt.Sub(inv.StartedAt)
	t.Logf("%d SCANs over %d keys of other data and %d contexts: paced to %v at %d a second", scans.n, others, contexts, took, perSecond)
	if least := time.Duration(others*9/10) * time.Second / perSecond; took < least {
		t.Errorf("the scan took %v; stepping over %d keys at %d a second takes %v at least", took, others, perSecond, least)
	}
	if least := time.Duration(scans.n)*time.Second/perSecond - minSleep; took < least {
		t.Errorf("the scan took %v for %d SCANs, less than one read each at %d a second", took, scans.n, perSecond)
	}
}

// scansAtOnce counts the scans that run at once, across replicas, and the most that did.
type scansAtOnce struct {
	mu        sync.Mutex
	now, most int
}

// watched is a Redis store whose scans scansAtOnce counts.
type watched struct {
	*redis.Store
	w *scansAtOnce
}

func (s watched) Scan(ctx context.Context, walked func(int) error, each func(string, segments.Membership) error) error {
	s.w.mu.Lock()
	s.w.now++
	s.w.most = max(s.w.most, s.w.now)
	s.w.mu.Unlock()
	defer func() {
		s.w.mu.Lock()
		s.w.now--
		s.w.mu.Unlock()
	}()
	return s.Store.Scan(ctx, walked, each)
}

// TestRedisLeaseOutlastsALongScan: two replicas on one Redis, and a scan (about 6 s) longer
// than the lease's TTL (an interval and a half: 3 s). The scanner renews the lease as it
// scans, so the other never starts a scan of its own meanwhile, and serves the counts the
// first stores; when Run ends, the lease is given back. The Redis is the test's own: SCAN
// walks every key of the database, so other tests' keys would set the scan's length.
func TestRedisLeaseOutlastsALongScan(t *testing.T) {
	const contexts, perSecond = 200, 50
	c := redistest.Start(t).Client()
	const prefix = "lease"
	for i := range contexts {
		c.SAdd(t.Context(), redis.New(c, prefix).IncludeKey(segments.Hash(fmt.Sprint(i))), "a.g1")
	}
	w := &scansAtOnce{}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	envs := make([]*segments.Environment, 2)
	logs := make([]bytes.Buffer, 2)
	for i := range envs {
		envs[i] = environmentWithPrefix(t, "production", prefix, watched{redis.New(c, prefix), w})
		l := New(envs[i:i+1], Settings{Interval: 2 * time.Second, ReadsPerSecond: perSecond}, slog.New(slog.NewTextHandler(&logs[i], nil)), nil)
		wg.Go(func() { _ = l.Run(ctx) })
	}
	for envs[0].Inventory().FinishedAt.IsZero() || envs[1].Inventory().FinishedAt.IsZero() { // each serves a complete scan
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	cancel()
	wg.Wait()
	if w.most != 1 {
		t.Errorf("%d scans ran at once, want 1", w.most)
	}
	for i, env := range envs {
		if got := env.Inventory(); got.Contexts != contexts || got.LastError != "" {
			t.Errorf("replica %d serves %+v, want %d contexts and no error", i, got, contexts)
		}
		if strings.Contains(logs[i].String(), "level=WARN") {
			t.Errorf("replica %d warned:\n%s", i, logs[i].String())
		}
	}
	if n := c.Exists(context.Background(), redis.LeaseKey(prefix)).Val(); n != 0 {
		t.Errorf("the lease is still held after Run ended (%d key)", n)
	}
}

// sharedStore is a store replicas share the scan of.
type sharedStore interface {
	segments.Store
	Scanner
	Fleet
}

// fleets open each store that replicas share, empty, under a prefix of the test's own, with
// what writes a stored result that is not one (invalid data at the stored result's key).
var fleets = []struct {
	name string
	open func(t *testing.T) (s sharedStore, prefix string, corrupt func())
}{
	{"redis", func(t *testing.T) (sharedStore, string, func()) {
		c := redistest.Client(t)
		prefix := redistest.Prefix(t, c)
		return redis.New(c, prefix), prefix, func() { c.Set(context.Background(), redis.InventoryKey(prefix), "{", 0) }
	}},
	{"dynamodb", func(t *testing.T) (sharedStore, string, func()) {
		c := dynamotest.Client(t, dynamotest.Shared(t).URL)
		table, prefix := dynamotest.Table(t, c), "bigsegtest"
		s := dynamodb.New(c, table, prefix)
		return s, prefix, func() {
			item := dynamotest.Key(s.InventoryNamespace(), "result")
			item["data"] = &types.AttributeValueMemberB{Value: []byte("not gzip")}
			dynamotest.Put(t, c, table, item)
		}
	}},
}

// TestStoredInventoryUnreadableIsShown: a replica that cannot read the result another
// replica stored (here it is not an inventory) shows it on /segments, as a failed scan is
// shown: the counts served stay, with the error and when; a good result stored later clears
// it.
func TestStoredInventoryUnreadableIsShown(t *testing.T) {
	for _, f := range fleets {
		t.Run(f.name, func(t *testing.T) {
			store, prefix, corrupt := f.open(t)
			if held, err := store.TakeLease(t.Context(), "another replica", time.Hour); !held || err != nil {
				t.Fatalf("TakeLease: %v, %v", held, err)
			}
			fc := newFakeClock()
			stored := func(n int64) {
				inv := segments.Inventory{State: segments.ScanComplete, Contexts: n, StartedAt: fc.t, FinishedAt: fc.t}
				if err := store.SaveInventory(t.Context(), encode("production", inv, 0)); err != nil {
					t.Fatal(err)
				}
			}
			env := environmentWithPrefix(t, "production", prefix, store)
			l := newLoop(fc, &bytes.Buffer{}, nil, env)
			stored(2)
			l.round(t.Context())
			corrupt()
			fc.t = fc.t.Add(interval)
			l.round(t.Context())
			got := env.Inventory()
			if got.Contexts != 2 || !strings.Contains(got.LastError, "load the stored inventory") || !got.LastErrorAt.Equal(fc.t) {
				t.Errorf("after a stored result that is not one: %+v; want 2 contexts, the error at %v", got, fc.t)
			}
			fc.t = fc.t.Add(interval)
			stored(3)
			l.round(t.Context())
			if got := env.Inventory(); got.Contexts != 3 || got.LastError != "" {
				t.Errorf("after a good result: %+v; want 3 contexts and no error", got)
			}
		})
	}
}

// TestRunReleasesTheLease: when Run ends (a replica shuts down), the lease it held is given
// back, so that another replica takes it at once, not an interval and a half later.
func TestRunReleasesTheLease(t *testing.T) {
	for _, f := range fleets {
		t.Run(f.name, func(t *testing.T) {
			store, prefix, _ := f.open(t)
			env := environmentWithPrefix(t, "production", prefix, store)
			l := New([]*segments.Environment{env}, Settings{Interval: time.Hour}, slog.New(slog.DiscardHandler), nil)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error)
			go func() { done <- l.Run(ctx) }()
			for env.Inventory().State != segments.ScanComplete {
				time.Sleep(10 * time.Millisecond) // polling a condition
			}
			if held, err := store.TakeLease(t.Context(), "another replica", time.Hour); held || err != nil {
				t.Fatalf("while Run runs, another replica took the lease: %v, %v", held, err)
			}
			cancel()
			<-done
			if held, err := store.TakeLease(t.Context(), "another replica", time.Hour); !held || err != nil {
				t.Errorf("after Run ended, another replica could not take the lease: %v, %v", held, err)
			}
		})
	}
}
