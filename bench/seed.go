package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/redis"
)

// dataset is the seeded data: contexts user-0 … user-(n-1) under a prefix of the run's own.
type dataset struct {
	client  *goredis.Client
	prefix  string
	n       int
	hashes  []string
	cleanup func()
}

// seed writes n contexts, 3 or 4 refs each, a mix of included and excluded, drawn from a
// pool of 60 refs in 500 distinct sets (real data repeats sets heavily).
func seed(ctx context.Context, o options) (*dataset, error) {
	opts, err := goredis.ParseURL(o.redisURL)
	if err != nil {
		return nil, err
	}
	client := goredis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis %s: %w", o.redisURL, err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	d := &dataset{client: client, prefix: "bigsegbench-" + hex.EncodeToString(b[:]), n: o.contexts}
	d.cleanup = func() {
		logf("removing the seeded keys under %s", d.prefix)
		if err := deletePrefix(context.Background(), client, d.prefix); err != nil {
			logf("cleanup: %v", err)
		}
		client.Close()
	}

	sets := make([][2][]string, 500)
	for i := range sets {
		refs := 3 + i%2
		for j := range refs {
			ref := fmt.Sprintf("segment-%02d.g%d", (i*7+j*11)%30, 1+(i+j)%2)
			if (i+j)%3 == 0 {
				sets[i][1] = append(sets[i][1], ref)
			} else {
				sets[i][0] = append(sets[i][0], ref)
			}
		}
	}
	d.hashes = make([]string, o.contexts)
	contexts := make([]fixture.Context, o.contexts)
	for i := range contexts {
		h := segments.Hash("user-" + strconv.Itoa(i))
		d.hashes[i] = h
		s := sets[(i*7919)%len(sets)]
		contexts[i] = fixture.Context{Hash: h, Included: s[0], Excluded: s[1]}
	}
	start := time.Now()
	logf("seeding %d contexts under %s", o.contexts, d.prefix)
	store := redis.New(client, d.prefix)
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	chunk := (len(contexts) + workers - 1) / workers
	for w := range workers {
		part := contexts[min(w*chunk, len(contexts)):min((w+1)*chunk, len(contexts))]
		wg.Go(func() {
			if _, err := store.Load(ctx, part, redis.LoadOptions{SynchronizedOn: time.Now(), BatchSize: 2000}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		d.cleanup()
		return nil, fmt.Errorf("seed: %w", err)
	}
	logf("seeded in %s", time.Since(start).Round(time.Millisecond))

	// Play the synchronizer: keep synchronized_on fresh, so that answers stay HEALTHY however
	// long the run takes.
	syncCtx, stopSync := context.WithCancel(context.Background())
	var syncDone sync.WaitGroup
	syncDone.Go(func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-syncCtx.Done():
				return
			case <-t.C:
				client.Set(syncCtx, store.SynchronizedOnKey(), strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
			}
		}
	})
	cleanup := d.cleanup
	d.cleanup = func() {
		stopSync()
		syncDone.Wait()
		cleanup()
	}
	return d, nil
}

// deletePrefix removes every key under prefix (SCAN and UNLINK; never FLUSHALL).
func deletePrefix(ctx context.Context, c *goredis.Client, prefix string) error {
	iter := c.Scan(ctx, 0, prefix+":*", 10000).Iterator()
	var keys []string
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := c.Unlink(ctx, keys...).Err()
		keys = keys[:0]
		return err
	}
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 10000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}
