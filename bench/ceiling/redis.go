package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// loadRedis makes bigseg's cache-miss reads for uniformly random contexts from -workers
// goroutines for -duration, and prints the summary in the form of the benchmark's wrk script.
func loadRedis(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ceiling redis", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", "redis://127.0.0.1:6379", "Redis URL")
	prefix := fs.String("prefix", "launchdarkly", "key prefix of the Big Segments data")
	contexts := fs.Int("contexts", 1_000_000, "contexts seeded: user-0 … user-(n-1)")
	workers := fs.Int("workers", 64, "concurrent readers (and pool size)")
	duration := fs.Duration("duration", 6*time.Second, "how long to run")
	seed := fs.Uint64("seed", 1, "seed of the random contexts")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts, err := goredis.ParseURL(*redisURL)
	if err != nil {
		return err
	}
	opts.PoolSize, opts.Protocol = *workers, 2 // RESP2, as bigseg
	client := goredis.NewClient(opts)
	defer client.Close()

	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	latencies := make([][]time.Duration, *workers)
	errs := make([]int, *workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(*seed, uint64(w)))
			for {
				t0 := time.Now()
				err := readMembership(ctx, client, *prefix, rnd.IntN(*contexts))
				if ctx.Err() != nil {
					return // cut short by the end of the run: not counted
				}
				if err != nil {
					errs[w]++
				}
				latencies[w] = append(latencies[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(latencies...)
	slices.Sort(all)
	total, failed := len(all), 0
	for _, n := range errs {
		failed += n
	}
	if total == 0 {
		return fmt.Errorf("no reads in %s", elapsed)
	}
	fmt.Fprintf(stdout, `BENCHJSON {"total":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"non2xx":0,"errors":%d}`+"\n",
		total, elapsed.Microseconds(), all[total/2].Microseconds(), all[total*99/100].Microseconds(), failed)
	return nil
}

// readMembership reads context user-i as bigseg does on a miss: both sets in one pipeline.
func readMembership(ctx context.Context, c *goredis.Client, prefix string, i int) error {
	sum := sha256.Sum256([]byte("user-" + strconv.Itoa(i)))
	hash := base64.StdEncoding.EncodeToString(sum[:])
	pipe := c.Pipeline()
	inc := pipe.SMembers(ctx, prefix+":big_segment_include:"+hash)
	exc := pipe.SMembers(ctx, prefix+":big_segment_exclude:"+hash)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	if inc.Err() != nil {
		return inc.Err()
	}
	return exc.Err()
}
