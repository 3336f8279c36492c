package guard

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// MaxSettingFileBytes bounds the files that settings name (tokens, secrets, certificates):
// far larger than any real one, so that naming the wrong file (a log, /dev/zero) is an error
// at once rather than memory spent without bound.
const MaxSettingFileBytes = 1 << 20

// ReadSettingFile reads a file that a setting names, whole, up to MaxSettingFileBytes.
func ReadSettingFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSettingFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSettingFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a setting file", path, MaxSettingFileBytes)
	}
	return b, nil
}

// FileCheckInterval is the least time between two looks at a setting's files.
const FileCheckInterval = time.Second

// recheck hands out turns to look at files again: at most one per FileCheckInterval, one at
// a time, and never to a caller that would have to wait for another's look. Between turns it
// costs a look at the clock and an atomic load.
type recheck struct {
	now func() time.Time

	next    atomic.Int64 // unix nanoseconds before which no look is due
	mu      sync.Mutex
	checked time.Time // when the last look began
	busy    bool
}

// due says whether the caller should look now; if so, it must call done after.
func (r *recheck) due() bool {
	now := r.now()
	if now.UnixNano() < r.next.Load() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy || now.Sub(r.checked) < FileCheckInterval {
		return false
	}
	r.busy, r.checked = true, now
	r.next.Store(now.Add(FileCheckInterval).UnixNano())
	return true
}

func (r *recheck) done() {
	r.mu.Lock()
	r.busy = false
	r.mu.Unlock()
}

// watch calls look every FileCheckInterval until ctx ends, then returns nil: the loop of
// Tokens.Run and Certificates.Run.
func watch(ctx context.Context, look func()) error {
	ticker := time.NewTicker(FileCheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			look()
		}
	}
}
