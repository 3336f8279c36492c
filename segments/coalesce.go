package segments

import "sync"

// maxReadBatch bounds how many cache misses one coalesced store read carries.
const maxReadBatch = 256

// coalescer reads memberships for concurrent cache misses, sharing work two ways:
//
//   - a miss for a context already pending or being read joins that read, as singleflight
//     would, so N concurrent misses for one context cost one read;
//   - misses for different contexts that arrive while maxInFlight reads are already running
//     queue up, and the next free reader sends the whole queue (up to maxBatch) as one store
//     call: one Redis pipeline instead of one round trip each.
//
// Under light load every miss finds a free reader and is read at once, alone: coalescing adds
// no waiting, only the batching that concurrency makes possible.
//
// Readers are goroutines, counted in readers under mu. While Service.Run runs (keep), an idle
// reader parks and is woken by the next miss, so production pays neither for starting
// goroutines nor for growing their stacks (a new goroutine's stack grows, by copying, through
// go-redis's deep call chain: 6% of CPU in the cold benchmark before readers were kept).
// Otherwise a reader ends as soon as the queue is empty. When Run ends it stops keeping
// readers and waits until the count is zero. The count is not a sync.WaitGroup because a
// lookup that outlives the server's shutdown may start a reader while Run waits, and a
// WaitGroup forbids an Add from zero concurrent with Wait; under mu the two are simply
// ordered, and the late reader reads its miss and ends.
//
// Reads run on a context detached from the callers (one caller giving up must not fail the
// others), bounded by the service's lookup timeout. A caller stops waiting when its own context
// ends; the read still completes and is delivered to whoever else waits.
type coalescer struct {
	read        func(hashes []string) ([]Read, uint64)
	maxInFlight int
	maxBatch    int

	mu      sync.Mutex
	idle    *sync.Cond       // parked readers wait on it, with mu
	gone    *sync.Cond       // signalled, with mu, when readers drops to zero
	calls   map[string]*call // pending or being read, by hash
	queue   []*call          // pending
	readers int              // reader goroutines, parked ones included
	parked  int              // readers waiting for work
	keep    bool             // park idle readers instead of ending them
}

type call struct {
	hash       string
	done       chan struct{} // closed when m, err and generation are set
	m          Membership
	err        error
	generation uint64 // the cache generation the read started in
}

func newCoalescer(read func([]string) ([]Read, uint64), maxInFlight, maxBatch int) *coalescer {
	c := &coalescer{
		read:        read,
		maxInFlight: max(maxInFlight, 1),
		maxBatch:    max(maxBatch, 1),
		calls:       make(map[string]*call),
	}
	c.idle = sync.NewCond(&c.mu)
	c.gone = sync.NewCond(&c.mu)
	return c
}

// keepReaders parks idle readers until the returned function is called; that function ends
// the parked readers and waits until no reader is left, those started meanwhile included.
// Misses after it returns are still read, by readers that end when the queue is empty.
func (c *coalescer) keepReaders() (stop func()) {
	c.mu.Lock()
	c.keep = true
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.keep = false
		c.idle.Broadcast()
		for c.readers > 0 {
			c.gone.Wait()
		}
	}
}

// get returns the call reading hash, starting or joining one.
func (c *coalescer) get(hash string) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.calls[hash]; ok {
		return cl
	}
	cl := &call{hash: hash, done: make(chan struct{})}
	c.calls[hash] = cl
	c.queue = append(c.queue, cl)
	switch {
	case c.parked > 0:
		c.idle.Signal()
	case c.readers < c.maxInFlight:
		c.readers++
		go c.readQueue()
	}
	return cl
}

// readQueue reads queued calls, a batch at a time; when the queue is empty it parks (keep)
// or ends.
func (c *coalescer) readQueue() {
	c.mu.Lock()
	for {
		for len(c.queue) == 0 {
			if !c.keep {
				c.readers--
				if c.readers == 0 {
					c.gone.Broadcast()
				}
				c.mu.Unlock()
				return
			}
			c.parked++
			c.idle.Wait()
			c.parked--
		}
		n := min(len(c.queue), c.maxBatch)
		batch := make([]*call, n)
		copy(batch, c.queue)
		c.queue = c.queue[n:]
		if len(c.queue) == 0 {
			c.queue = nil // let the backing array go
		}
		c.mu.Unlock()

		reads, gen := c.readBatch(batch)
		c.mu.Lock()
		for i, cl := range batch {
			cl.m, cl.err, cl.generation = reads[i].Membership, reads[i].Err, gen
			delete(c.calls, cl.hash)
		}
		c.mu.Unlock()
		for _, cl := range batch {
			close(cl.done)
		}
		c.mu.Lock()
	}
}

// readBatch reads a batch; it always returns one Read per call (Service.readStore turns a
// store's panic, or an answer of the wrong length, into errors).
func (c *coalescer) readBatch(batch []*call) ([]Read, uint64) {
	hashes := make([]string, len(batch))
	for i, cl := range batch {
		hashes[i] = cl.hash
	}
	return c.read(hashes)
}
