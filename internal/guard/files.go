package guard

import (
	"fmt"
	"io"
	"os"
	"sync"
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
// a time, and never to a caller that would have to wait for another's look.
type recheck struct {
	now func() time.Time

	mu      sync.Mutex
	checked time.Time // when the last look began
	busy    bool
}

// due says whether the caller should look now; if so, it must call done after.
func (r *recheck) due() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy || r.now().Sub(r.checked) < FileCheckInterval {
		return false
	}
	r.busy, r.checked = true, r.now()
	return true
}

func (r *recheck) done() {
	r.mu.Lock()
	r.busy = false
	r.mu.Unlock()
}
