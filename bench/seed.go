package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bigseg/bigseg/segments"
	goredis "github.com/redis/go-redis/v9"
)

// seed writes n contexts, user-0 … user-(n-1), in the LaunchDarkly layout, from 4 connections
// in pipelines of 1000 contexts, then the storm's contexts, the cursor and the synchronization
// time, as the Relay Proxy leaves them after a synchronization.
// It returns how much memory Redis took per context (INFO memory's used_memory, before and
// after).
func seed(ctx context.Context, c *goredis.Client, n int) (bytesPerContext float64, err error) {
	start := time.Now()
	before, err := usedMemory(ctx, c)
	if err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	var sets [distinctSets][2][]any // SADD's arguments
	for i, s := range membershipSets() {
		sets[i] = [2][]any{toAny(s[0]), toAny(s[1])}
	}
	const workers, batch = 4, 1000
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for from := w * batch; from < n; from += workers * batch {
				if err := seedBatch(ctx, c, &sets, from, min(from+batch, n)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	pipe := c.TxPipeline()
	for i := range stormContexts {
		pipe.SAdd(ctx, includePrefix+segments.Hash(stormKey(i)), sets[0][0]...)
	}
	pipe.Set(ctx, cursorKey, "bench-"+strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
	pipe.Set(ctx, syncedOnKey, strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("seed: cursor: %w", err)
	}
	after, err := usedMemory(ctx, c)
	if err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	bytesPerContext = float64(after-before) / float64(n)
	logf("seeded %d contexts in %s; Redis holds %.0f bytes per context", n, time.Since(start).Round(time.Millisecond), bytesPerContext)
	return bytesPerContext, nil
}

// usedMemory is Redis's used_memory.
func usedMemory(ctx context.Context, c *goredis.Client) (int64, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO memory")
}

// seedBatch writes contexts [from, to) in one pipeline.
func seedBatch(ctx context.Context, c *goredis.Client, sets *[distinctSets][2][]any, from, to int) error {
	pipe := c.Pipeline()
	for i := from; i < to; i++ {
		hash := segments.Hash(contextKey(i))
		s := sets[setOf(i)]
		if len(s[0]) > 0 {
			pipe.SAdd(ctx, includePrefix+hash, s[0]...)
		}
		if len(s[1]) > 0 {
			pipe.SAdd(ctx, excludePrefix+hash, s[1]...)
		}
	}
	_, err := pipe.Exec(ctx)
	return err
}

func toAny(refs []string) []any {
	out := make([]any, len(refs))
	for i, r := range refs {
		out[i] = r
	}
	return out
}

// synchronizer plays the Relay Proxy while it is idle: it refreshes the synchronized_on keys
// every relayIdleEvery seconds and leaves the cursors alone, until Close.
type synchronizer struct {
	stop context.CancelFunc
	done sync.WaitGroup
}

func startSynchronizer(c *goredis.Client, keys []string) *synchronizer {
	ctx, stop := context.WithCancel(context.Background())
	s := &synchronizer{stop: stop}
	s.done.Go(func() {
		t := time.NewTicker(relayIdleEvery * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				pipe := c.Pipeline()
				for _, k := range keys {
					pipe.Set(ctx, k, strconv.FormatInt(now.UnixMilli(), 10), 0)
				}
				if _, err := pipe.Exec(ctx); err != nil && ctx.Err() == nil {
					logf("synchronizer: %v", err)
				}
			}
		}
	})
	return s
}

// Close stops the synchronizer and waits for it.
func (s *synchronizer) Close() {
	s.stop()
	s.done.Wait()
}
