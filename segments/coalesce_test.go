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
				lookup := func(i int) {
					wg.Go(func() { answers[i] = s.LookupHash(context.Background(), Hash("user-"+strconv.Itoa(i))) })
				}
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
					if _, listed := mapOf(r.Membership)["seg-"+strconv.Itoa(i)+".g1"]; !listed || r.Err != nil {
						t.Errorf("user-%d got %v, %v", i, mapOf(r.Membership), r.Err)
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
		wg.Go(func() { s.LookupHash(context.Background(), Hash("k"+strconv.Itoa(i%20))) })
	}
	wg.Wait()
	goleak.VerifyNone(t)
}

func TestRunKeepsReadersAndStopsThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, _ := newTestService(t, WithCache(0, 0), WithPollInterval(time.Hour))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		counts := func() (readers, parked int) {
			s.reads.mu.Lock()
			defer s.reads.mu.Unlock()
			return s.reads.readers, s.reads.parked
		}
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() { s.LookupHash(context.Background(), Hash("k"+strconv.Itoa(i))) })
		}
		wg.Wait()
		synctest.Wait() // every reader has run out of work
		readers, parked := counts()
		if readers == 0 || parked != readers {
			t.Fatalf("readers %d, parked %d while Run runs; want some, all parked", readers, parked)
		}
		for i := range 100 { // parked readers serve later misses: no new ones beyond the bound
			s.LookupHash(context.Background(), Hash("later"+strconv.Itoa(i)))
		}
		if readers, _ := counts(); readers > DefaultReadsInFlight {
			t.Errorf("%d readers, over the bound of %d", readers, DefaultReadsInFlight)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if readers, parked := counts(); readers != 0 || parked != 0 {
			t.Errorf("after Run: readers %d, parked %d; want none", readers, parked)
		}
		if r := s.LookupHash(context.Background(), Hash("after Run")); r.Err != nil { // transient readers again
			t.Errorf("lookup after Run: %v", r.Err)
		}
	})
}

// What stopping the kept readers waits for, and what a miss after it gets.
func TestStopReaders(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, c *coalescer, stop func(), release chan struct{})
	}{
		{"stop waits for a reader inside a read", func(t *testing.T, c *coalescer, stop func(), release chan struct{}) {
			cl := c.get("a")
			synctest.Wait() // the reader is inside the read
			stopped := make(chan struct{})
			go func() { stop(); close(stopped) }()
			synctest.Wait()
			select {
			case <-stopped:
				t.Fatal("stop returned while a reader was reading")
			default:
			}
			close(release)
			<-cl.done
			<-stopped
		}},
		{"stop ends parked readers", func(t *testing.T, c *coalescer, stop func(), release chan struct{}) {
			close(release)
			for _, h := range []string{"a", "b", "c"} {
				<-c.get(h).done
			}
			synctest.Wait() // the reader is parked
			stop()
		}},
		{"a miss after stop is read", func(t *testing.T, c *coalescer, stop func(), release chan struct{}) {
			stop()
			close(release)
			<-c.get("a").done
		}},
		{"a miss while stop waits is read", func(t *testing.T, c *coalescer, stop func(), release chan struct{}) {
			first := c.get("a")
			synctest.Wait()
			stopped := make(chan struct{})
			go func() { stop(); close(stopped) }()
			synctest.Wait()
			second := c.get("b") // queued behind the read in flight
			close(release)
			<-first.done
			<-second.done
			<-stopped
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				read := func(hashes []string) ([]Read, uint64) {
					<-release
					return make([]Read, len(hashes)), 0
				}
				c := newCoalescer(read, 1, maxReadBatch)
				stop := c.keepReaders()
				tt.run(t, c, stop, release)
				stop() // a second stop waits for readers started since the first
				c.mu.Lock()
				defer c.mu.Unlock()
				if c.readers != 0 || c.parked != 0 || len(c.calls) != 0 {
					t.Errorf("after stop: readers %d, parked %d, calls %d; want none", c.readers, c.parked, len(c.calls))
				}
			})
		})
	}
}

// Lookups that outlive the server's shutdown start readers while Run waits for the kept ones
// to end. Stopping must stay correct under that race: every miss is read, no reader is left
// behind, and nothing panics. (A sync.WaitGroup counting readers broke its rule that an Add
// from zero must not run concurrently with Wait; run with -race, which reports it.)
func TestStopRacesWithLateMisses(t *testing.T) {
	read := func(hashes []string) ([]Read, uint64) { return make([]Read, len(hashes)), 0 }
	tests := []struct {
		name                      string
		maxInFlight, callers, per int
	}{
		{"one reader", 1, 8, 20},
		{"four readers", 4, 8, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for round := range 1000 {
				c := newCoalescer(read, tt.maxInFlight, maxReadBatch)
				stop := c.keepReaders()
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range tt.callers {
					wg.Go(func() {
						<-start
						for j := range tt.per {
							<-c.get(strconv.Itoa(i) + "/" + strconv.Itoa(j)).done
						}
					})
				}
				wg.Go(func() { <-start; stop() })
				close(start)
				wg.Wait() // every miss was read: before, during or after stop
				stop()
				c.mu.Lock()
				readers, calls := c.readers, len(c.calls)
				c.mu.Unlock()
				if readers != 0 || calls != 0 {
					t.Fatalf("round %d: after stop, readers %d, calls %d; want none", round, readers, calls)
				}
			}
			goleak.VerifyNone(t)
		})
	}
}
