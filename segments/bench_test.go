package segments

import (
	"context"
	"fmt"
	"hash/fnv"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// generatedStore answers every hash with one of a few hundred 4-ref membership sets, built
// afresh on every read (new strings each time, as Redis replies are), and holds nothing
// itself: only what the service keeps shows up in heap measurements.
type generatedStore struct{ sets [][2][]string }

func newGeneratedStore(distinctSets int) *generatedStore {
	g := &generatedStore{}
	for i := range distinctSets {
		var inc, exc []string
		for j := range 4 {
			ref := fmt.Sprintf("segment-%02d.g%d", (i*7+j*13)%40, 1+j%3)
			if (i+j)%3 == 0 {
				exc = append(exc, ref)
			} else {
				inc = append(inc, ref)
			}
		}
		g.sets = append(g.sets, [2][]string{inc, exc})
	}
	return g
}

func (g *generatedStore) Memberships(ctx context.Context, hashes []string) []Read {
	reads := make([]Read, len(hashes))
	for i, h := range hashes {
		f := fnv.New32a()
		f.Write([]byte(h))
		set := g.sets[int(f.Sum32())%len(g.sets)]
		inc, exc := make([]string, len(set[0])), make([]string, len(set[1]))
		for j, r := range set[0] {
			inc[j] = strings.Clone(r)
		}
		for j, r := range set[1] {
			exc[j] = strings.Clone(r)
		}
		reads[i].Membership = NewMembership(inc, exc)
	}
	return reads
}

func (g *generatedStore) Metadata(ctx context.Context) (Metadata, error) {
	return Metadata{LastSynchronized: time.Now()}, nil
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkCacheMemory reports the heap bytes each cached context costs once 1,000,000
// contexts (4 refs each, from 200 distinct sets) are cached by key. Run with -benchtime=1x.
func BenchmarkCacheMemory(b *testing.B) {
	const contexts = 1_000_000
	for b.Loop() {
		store := newGeneratedStore(200)
		keys := make([]string, contexts)
		for i := range keys {
			keys[i] = "user-" + strconv.Itoa(i)
		}
		before := heapAlloc()
		s := New(store, WithCache(contexts, time.Hour))
		ctx := context.Background()
		queries := make([]Query, 0, 1000)
		for i := 0; i < contexts; i += 1000 {
			queries = queries[:0]
			for _, k := range keys[i : i+1000] {
				queries = append(queries, Query{Key: k})
			}
			s.LookupBatch(ctx, queries)
		}
		queries = nil
		after := heapAlloc()
		if n := s.CacheLen(); n != contexts {
			b.Fatalf("cached %d contexts, want %d", n, contexts)
		}
		b.ReportMetric(float64(after-before)/contexts, "heap-bytes/context")
		runtime.KeepAlive(s)
		runtime.KeepAlive(keys)
	}
}

// TestCacheMemoryBound keeps the memory target from regressing: a smaller run of the same
// measurement, with the budget the benchmark shows at 1,000,000 contexts.
func TestCacheMemoryBound(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("heap measurement: not in -short or -race runs")
	}
	const contexts = 200_000
	store := newGeneratedStore(200)
	keys := make([]string, contexts)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	before := heapAlloc()
	s := New(store, WithCache(contexts, time.Hour))
	for i := 0; i < contexts; i += 1000 {
		var q []Query
		for _, k := range keys[i : i+1000] {
			q = append(q, Query{Key: k})
		}
		s.LookupBatch(context.Background(), q)
	}
	perContext := float64(heapAlloc()-before) / contexts
	runtime.KeepAlive(s)
	runtime.KeepAlive(keys)
	t.Logf("%.0f heap bytes per cached context", perContext)
	if perContext > 250 {
		t.Errorf("%.0f heap bytes per cached context, over the 250-byte budget", perContext)
	}
}

func BenchmarkLookupCacheHit(b *testing.B) {
	s := New(newGeneratedStore(200))
	ctx := context.Background()
	s.Lookup(ctx, "alice")
	b.ReportAllocs()
	for b.Loop() {
		if r := s.Lookup(ctx, "alice"); !r.Cached {
			b.Fatal("miss")
		}
	}
}

func BenchmarkLookupCacheHitParallel(b *testing.B) {
	s := New(newGeneratedStore(200))
	ctx := context.Background()
	for i := range 1000 {
		s.Lookup(ctx, "user-"+strconv.Itoa(i))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.Lookup(ctx, "user-"+strconv.Itoa(i%1000))
			i++
		}
	})
}

func BenchmarkMembershipAll(b *testing.B) {
	m := NewMembership([]string{"beta-users.g3", "early-access.g2", "enterprise.g7"}, []string{"blocked.g1"})
	b.ReportAllocs()
	for b.Loop() {
		for range m.All() {
		}
	}
}
