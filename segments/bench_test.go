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

// cachedBytesPerContext caches n contexts (4 refs each, from 200 distinct sets) and returns
// the heap bytes the service holds for each.
func cachedBytesPerContext(t testing.TB, n int) float64 {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	before := heapAlloc()
	s := newOne(newGeneratedStore(200), Config{CacheSize: 2 * n, CacheTTL: time.Hour}) // n fit in the young generation
	hashes := make([]string, 0, 1000)
	for i := 0; i < n; i += 1000 {
		hashes = hashes[:0]
		for _, k := range keys[i:min(i+1000, n)] {
			hashes = append(hashes, Hash(k))
		}
		s.LookupBatch(context.Background(), hashes)
	}
	hashes = nil
	after := heapAlloc()
	if got := s.CacheLen(); got != n {
		t.Fatalf("cached %d contexts, want %d", got, n)
	}
	runtime.KeepAlive(s)
	runtime.KeepAlive(keys)
	return float64(after-before) / float64(n)
}

// BenchmarkCacheMemory reports the heap bytes each cached context costs once 1,000,000
// contexts are cached. Run with -benchtime=1x.
func BenchmarkCacheMemory(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(cachedBytesPerContext(b, 1_000_000), "heap-bytes/context")
	}
}

// TestCacheMemoryBound keeps the memory target from regressing: a smaller run of the same
// measurement, against the 250-byte budget.
func TestCacheMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("heap measurement: not in -short runs")
	}
	perContext := cachedBytesPerContext(t, 200_000)
	t.Logf("%.0f heap bytes per cached context", perContext)
	if perContext > 250 {
		t.Errorf("%.0f heap bytes per cached context, over the 250-byte budget", perContext)
	}
}

func BenchmarkLookupCacheHit(b *testing.B) {
	s := newOne(newGeneratedStore(200), Config{CacheSize: DefaultCacheSize, CacheTTL: time.Hour}) // no expiry on a slow machine
	ctx := context.Background()
	s.LookupHash(ctx, Hash("alice"))
	b.ReportAllocs()
	for b.Loop() {
		if r := s.LookupHash(ctx, Hash("alice")); !r.Cached {
			b.Fatal("miss")
		}
	}
}

// BenchmarkLookupMiss is a lookup that misses the cache (it is off) and waits for its read,
// with the service running as in production.
func BenchmarkLookupMiss(b *testing.B) {
	s := newOne(newGeneratedStore(200), Config{NoCache: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	s.LookupHash(ctx, Hash("alice"))
	b.ReportAllocs()
	for b.Loop() {
		if a := s.LookupHash(ctx, Hash("alice")); a.Cached || a.Err != nil {
			b.Fatalf("cached %v, err %v", a.Cached, a.Err)
		}
	}
}

func BenchmarkLookupCacheHitParallel(b *testing.B) {
	s := newOne(newGeneratedStore(200), Config{})
	ctx := context.Background()
	for i := range 1000 {
		s.LookupHash(ctx, Hash("user-"+strconv.Itoa(i)))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.LookupHash(ctx, Hash("user-"+strconv.Itoa(i%1000)))
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
