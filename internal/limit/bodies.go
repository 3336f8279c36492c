package limit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

// Defaults for request bodies.
const (
	// DefaultBodyMemory bounds the memory of the request bodies being read or used at once.
	DefaultBodyMemory = 64 << 20
	// bodyChunk is the least memory a body reserves at a time as it arrives.
	bodyChunk = 32 << 10
	// freeBodyBytes is how much of each body needs no reservation: a connection's own share,
	// like its buffers, so that small batches never wait for memory.
	freeBodyBytes = 4 << 10
	// cutGrace is how long a body read is left alone before it may be cut to make room.
	cutGrace = 100 * time.Millisecond
)

var (
	// errNoBodyMemory is the error of a body that got no memory before its read deadline.
	errNoBodyMemory = errors.New("too many request bodies in flight; retry shortly")
	// errBodyCut is the error of a body read cut off to make room for others.
	errBodyCut = errors.New("request body was cut off: it arrived too slowly while others waited")
)

// Bodies bounds the memory that requests take while their bodies are read and their answers
// made, whatever the number of clients sending them; Limit is its middleware. Beyond its first freeBodyBytes,
// a body reserves memory as its bytes arrive, against one budget, then what decoding and
// answering it will take, and gives it all back once its request is answered. Requests that
// wait for memory are served in order; while any waits, the request that has held its memory
// longest (at least cutGrace) while the client paces it, reading its body or writing its
// answer, is cut off (its read or write deadline moves to now) to make room. So clients that
// send part of a body and stall, send it slowly, or do not read their answers cannot keep the
// others waiting for long.
type Bodies struct {
	mu       sync.Mutex
	size     int64 // the whole budget
	free     int64
	changed  chan struct{} // closed and replaced whenever memory is given back or a hold changes
	cuttable []*bodyHold   // holds paced by their clients: bodies being read, answers written
	waiting  []*bodyHold   // holds waiting for memory, first come first
	cutHeld  int64         // memory of holds cut, not yet given back
}

// bodyHold is one request's memory from the budget.
type bodyHold struct {
	b      *Bodies
	since  time.Time // when it became cuttable, or last got memory it waited for
	held   int64     // memory reserved
	cut    func()    // ends the read or write in progress at once
	wasCut bool
	waits  bool  // in Bodies.waiting
	needs  int64 // the memory it waits for
}

// NewBodies returns a budget of the given bytes.
func NewBodies(bytes int64) *Bodies {
	return &Bodies{size: bytes, free: bytes, changed: make(chan struct{})}
}

// Limit is middleware that reads a request's body whole, at most limit bytes and within
// timeout, with memory from the budget, before next sees it: next gets it from the body's
// Bytes method (interface{ Bytes() []byte }), without a copy, and uses(len(body)) more bytes of the budget for decoding and answering it, which Limit holds
// until next returns; while next writes its answer, the request may be cut to make room.
// Bodies that are too large (413), too slow (408), cut off to make room (408), or find no
// memory before their deadline (429, with Retry-After) are refused unread. The budget grows,
// if it must, to hold at least one body of limit bytes.
func (b *Bodies) Limit(limit int64, timeout time.Duration, uses func(n int64) int64, refuse Refuse) func(http.Handler) http.Handler {
	b.mu.Lock()
	if need := limit + 1 + uses(limit); need > b.size { // its buffer is read one byte past the limit
		b.free += need - b.size
		b.size = need
	}
	b.mu.Unlock()
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit { // refused before a byte of it is asked for (Expect: 100-continue)
				refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", limit))
				return
			}
			body, hold, err := b.read(w, r, limit, time.Now().Add(timeout), uses)
			defer hold.release()
			if err != nil {
				code, msg := bodyError(err, limit, timeout)
				if code == http.StatusTooManyRequests {
					w.Header().Set("Retry-After", "1")
				}
				refuse(w, r, code, msg)
				return
			}
			r.Body = &wholeBody{Reader: bytes.NewReader(body), b: body}
			next.ServeHTTP(&holdWriter{ResponseWriter: w, hold: hold}, r)
		})
	}
}

// bodyError is the status code and message of a body that could not be read.
func bodyError(err error, limit int64, timeout time.Duration) (int, string) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout, fmt.Sprintf("request body did not arrive within %v", timeout)
	case errors.Is(err, errBodyCut):
		return http.StatusRequestTimeout, err.Error()
	case errors.Is(err, errNoBodyMemory):
		return http.StatusTooManyRequests, err.Error()
	}
	return http.StatusBadRequest, "request body could not be read"
}

// wholeBody is a request body that Limit read whole: a handler gets it without a copy from its
// Bytes method (interface{ Bytes() []byte }), and knows by it that the body was read.
type wholeBody struct {
	*bytes.Reader
	b []byte
}

// Bytes is the whole body.
func (b *wholeBody) Bytes() []byte { return b.b }

// Close does nothing: the body is in memory.
func (b *wholeBody) Close() error { return nil }

// holdWriter makes its hold cuttable when the answer begins: a client that does not read its
// answer loses it, rather than keep the memory.
type holdWriter struct {
	http.ResponseWriter
	hold    *bodyHold
	writing bool
}

func (w *holdWriter) start() {
	if !w.writing {
		w.writing = true
		w.hold.writing(w.ResponseWriter)
	}
}

func (w *holdWriter) WriteHeader(code int) { w.start(); w.ResponseWriter.WriteHeader(code) }

func (w *holdWriter) Write(b []byte) (int, error) { w.start(); return w.ResponseWriter.Write(b) }

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *holdWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// read reads r's body, at most limit bytes, until deadline, reserving memory as it arrives,
// and then the memory that decoding and answering it will take: uses(len(body)) bytes. The hold
// is never nil: call its writing before the answer is written, and release once the request
// is answered. Errors are those of the body's reader, errNoBodyMemory and errBodyCut.
func (b *Bodies) read(w http.ResponseWriter, r *http.Request, limit int64, deadline time.Time, uses func(n int64) int64) (body []byte, h *bodyHold, err error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(deadline)
	h = &bodyHold{b: b, since: time.Now(), cut: func() { _ = rc.SetReadDeadline(time.Now()) }}
	b.mu.Lock()
	b.cuttable = append(b.cuttable, h)
	b.mu.Unlock()

	body, err = b.fill(r, h, http.MaxBytesReader(w, r.Body, limit), limit, deadline)
	if b.notCuttable(h) {
		// Cut, perhaps just as the body ended: the connection may already have seen the
		// deadline, and canceled the request's context.
		err = errBodyCut
	}
	if err != nil {
		return nil, h, err
	}
	all := int64(cap(body)) + uses(int64(len(body)))
	if err := b.reserve(r.Context(), h, max(all-freeBodyBytes, 0)-h.held, deadline); err != nil {
		return nil, h, err
	}
	return body, h, nil
}

// writing makes the hold cuttable while the answer is written to w: a client that does not
// read it loses it, rather than keep the memory.
func (h *bodyHold) writing(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.held == 0 || h.wasCut {
		return
	}
	h.since, h.cut = time.Now(), func() { _ = rc.SetWriteDeadline(time.Now()) }
	h.b.cuttable = append(h.b.cuttable, h)
}

// release gives the hold's memory back.
func (h *bodyHold) release() {
	h.b.notCuttable(h)
	h.b.giveBack(h)
}

// fill reads src to its end into a buffer that grows, by doubling, as bytes arrive.
func (b *Bodies) fill(r *http.Request, rd *bodyHold, src io.Reader, limit int64, deadline time.Time) ([]byte, error) {
	var body []byte
	for {
		if len(body) == cap(body) {
			size := min(max(2*int64(cap(body)), bodyChunk), limit+1) // +1: to see the end
			if cap(body) == 0 && r.ContentLength >= 0 {
				size = min(r.ContentLength+1, size)
			}
			if err := b.reserve(r.Context(), rd, max(size-freeBodyBytes, 0)-rd.held, deadline); err != nil {
				return nil, err
			}
			grown := make([]byte, len(body), size)
			copy(grown, body)
			body = grown
		}
		n, err := src.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			return body, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// reserve reserves n more bytes for rd, waiting its turn, and for memory, until deadline.
func (b *Bodies) reserve(ctx context.Context, rd *bodyHold, n int64, deadline time.Time) (err error) {
	if n <= 0 {
		return nil
	}
	defer func() {
		if err != nil {
			b.mu.Lock()
			b.stopWaiting(rd)
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		if rd.wasCut { // while it waited here for memory
			b.mu.Unlock()
			return errBodyCut
		}
		if b.free >= n && (len(b.waiting) == 0 || b.waiting[0] == rd) {
			b.free -= n
			rd.held += n
			if rd.waits {
				rd.since = time.Now() // its grace starts over
				b.stopWaiting(rd)
			}
			b.mu.Unlock()
			return nil
		}
		if !rd.waits {
			rd.waits, rd.needs = true, n
			b.waiting = append(b.waiting, rd)
		}
		wait := min(time.Until(deadline), b.makeRoom())
		changed := b.changed
		b.mu.Unlock()
		if wait <= 0 {
			return errNoBodyMemory
		}
		if err := sleep(ctx, wait, changed); err != nil {
			return err
		}
	}
}

// makeRoom cuts the cuttable hold that has held its memory longest, and is not waiting for
// more, if that was at least cutGrace ago and the holds cut already do not free enough for
// the first in line; it returns how long until the hold may be cut otherwise. b.mu is held.
func (b *Bodies) makeRoom() time.Duration {
	if b.free+b.cutHeld >= b.waiting[0].needs {
		return time.Hour // until the memory comes back
	}
	var victim *bodyHold
	for _, o := range b.cuttable {
		if !o.waits && !o.wasCut && (victim == nil || o.since.Before(victim.since)) {
			victim = o
		}
	}
	if victim == nil {
		return time.Hour
	}
	if age := time.Since(victim.since); age < cutGrace {
		return cutGrace - age
	}
	victim.wasCut = true
	victim.cut() // under b.mu: once notCuttable returns, no cut can follow
	b.cutHeld += victim.held
	return time.Hour
}

// sleep waits for d, changed to close, or ctx to end (its error).
func sleep(ctx context.Context, d time.Duration, changed <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// stopWaiting takes rd out of the waiting line, and lets the next one look. b.mu is held.
func (b *Bodies) stopWaiting(rd *bodyHold) {
	if !rd.waits {
		return
	}
	rd.waits = false
	b.waiting = slices.DeleteFunc(b.waiting, func(o *bodyHold) bool { return o == rd })
	b.wake()
}

// notCuttable takes h off the cuttable holds, so that it can no longer be cut, and says
// whether it was.
func (b *Bodies) notCuttable(h *bodyHold) (wasCut bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cuttable = slices.DeleteFunc(b.cuttable, func(o *bodyHold) bool { return o == h })
	b.wake()
	return h.wasCut
}

// giveBack returns rd's memory to the budget.
func (b *Bodies) giveBack(rd *bodyHold) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += rd.held
	if rd.wasCut {
		b.cutHeld -= rd.held
	}
	rd.held = 0
	b.wake()
}

// wake tells waiters that memory was given back, or a read ended or stopped waiting; b.mu is
// held. Only reads in b.waiting wait on b.changed, so with none there is no one to tell.
func (b *Bodies) wake() {
	if len(b.waiting) == 0 {
		return
	}
	close(b.changed)
	b.changed = make(chan struct{})
}
