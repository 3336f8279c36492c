package segments

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMissesForDifferentContextsShareOneRead(t *testing.T) {
	tests := []struct {
		name                  string
		maxInFlight, maxBatch int
		wantReads             int64
	}{
		{"one reader, batches unbounded", 1, 1000, 2}, // the blocked read, then all 50 at once
		{"one reader, batches of 10", 1, 10, 1 + 5},   // the blocked read, then 50 in fives of 10
		{"two readers", 2, 1000, 3},                   // two blocked reads, then the other 49 at once
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, store, _ := newTestService(t, WithCache(0, 0), WithReadsInFlight(tt.maxInFlight), WithLookupTimeout(0))
				s.reads = newCoalescer(s.readDetached, tt.maxInFlight, tt.maxBatch)
				s.Poll(context.Background())
				for i := range 51 {
					store.put("user-"+strconv.Itoa(i), []string{"seg-" + strconv.Itoa(i) + ".g1"}, nil)
				}
				store.block = make(chan struct{})
				var wg sync.WaitGroup
				answers := make([]Answer, 51)
				lookup := func(i int) { wg.Go(func() { answers[i] = s.Lookup(context.Background(), "user-"+strconv.Itoa(i)) }) }
				// Occupy every reader first, one at a time, then queue the rest behind them.
				for i := range tt.maxInFlight {
					lookup(i)
					synctest.Wait() // this reader is inside the store
				}
				for i := tt.maxInFlight; i < 51; i++ {
					lookup(i)
				}
				synctest.Wait()
				store.mu.Lock()
				close(store.block)
				store.block = nil
				store.mu.Unlock()
				wg.Wait()
				if got := store.reads.Load(); got != tt.wantReads {
					t.Errorf("store reads = %d, want %d", got, tt.wantReads)
				}
				if got := store.hashes.Load(); got != 51 {
					t.Errorf("hashes read = %d, want 51 (each once)", got)
				}
				for i, r := range answers {
					if _, listed := r.Membership.Map()["seg-"+strconv.Itoa(i)+".g1"]; !listed || r.Err != nil {
						t.Errorf("user-%d got %v, %v", i, r.Membership.Map(), r.Err)
					}
				}
			})
		})
	}
}

func TestCoalescerLeavesNoGoroutines(t *testing.T) {
	s, _, _ := newTestService(t, WithCache(0, 0))
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() { s.Lookup(context.Background(), "k"+strconv.Itoa(i%20)) })
	}
	wg.Wait()
	goleak.VerifyNone(t)
}

func TestRunKeepsReadersAndStopsThem(t *testing.T) {
	s, _, _ := newTestService(t, WithCache(0, 0), WithPollInterval(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	waitParked := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.reads.mu.Lock()
			readers, parked := s.reads.readers, s.reads.parked
			s.reads.mu.Unlock()
			if readers == want && parked == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("readers %d, parked %d; want %d parked", readers, parked, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { s.Lookup(context.Background(), "k"+strconv.Itoa(i)) })
	}
	wg.Wait()
	s.reads.mu.Lock()
	readers := s.reads.readers
	s.reads.mu.Unlock()
	if readers == 0 {
		t.Fatal("no reader kept while Run runs")
	}
	waitParked(readers)
	for i := range 100 { // parked readers serve later misses: no new ones beyond the bound
		s.Lookup(context.Background(), "later"+strconv.Itoa(i))
	}
	s.reads.mu.Lock()
	if s.reads.readers > DefaultReadsInFlight {
		t.Errorf("%d readers, over the bound of %d", s.reads.readers, DefaultReadsInFlight)
	}
	s.reads.mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitParked(0)
	goleak.VerifyNone(t)
	if r := s.Lookup(context.Background(), "after Run"); r.Err != nil { // transient readers again
		t.Errorf("lookup after Run: %v", r.Err)
	}
}
