package metrics

import (
	"math"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestShardedHistogramMatchesClientGolang feeds the same values, concurrently, to a sharded
// histogram and to client_golang's, and compares what a scrape would read.
func TestShardedHistogramMatchesClientGolang(t *testing.T) {
	sh := newShardedHistogram(latencyBuckets)
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ref", Help: "ref", Buckets: latencyBuckets})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 10000 {
				v := float64((i*7919+w*104729)%100000) / 10000 // 0 … 10 s, over every bucket and +Inf
				sh.observe(v)
				ref.Observe(v)
			}
		})
	}
	wg.Wait()
	var got, want dto.Metric
	if err := sh.metric(prometheus.NewDesc("x", "x", nil, nil)).Write(&got); err != nil {
		t.Fatal(err)
	}
	if err := ref.Write(&want); err != nil {
		t.Fatal(err)
	}
	g, w := got.GetHistogram(), want.GetHistogram()
	if g.GetSampleCount() != w.GetSampleCount() || math.Abs(g.GetSampleSum()-w.GetSampleSum()) > 1e-6*w.GetSampleSum() {
		t.Errorf("count, sum = %d, %f; want %d, %f", g.GetSampleCount(), g.GetSampleSum(), w.GetSampleCount(), w.GetSampleSum())
	}
	if len(g.Bucket) != len(w.Bucket) {
		t.Fatalf("%d buckets, want %d", len(g.Bucket), len(w.Bucket))
	}
	for i := range w.Bucket {
		if g.Bucket[i].GetUpperBound() != w.Bucket[i].GetUpperBound() || g.Bucket[i].GetCumulativeCount() != w.Bucket[i].GetCumulativeCount() {
			t.Errorf("bucket %d: le=%v %d, want le=%v %d", i, g.Bucket[i].GetUpperBound(), g.Bucket[i].GetCumulativeCount(),
				w.Bucket[i].GetUpperBound(), w.Bucket[i].GetCumulativeCount())
		}
	}
}

func TestShardedCounter(t *testing.T) {
	var c shardedCounter
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.inc()
			}
		})
	}
	wg.Wait()
	if c.value() != 8000 {
		t.Errorf("value = %v, want 8000", c.value())
	}
}
