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

// redisLoad is the command line of "ceiling redis".
type redisLoad struct {
	url, prefix       string
	contexts, workers int
	duration          time.Duration
	seed              uint64
}

func parseRedisLoad(args []string, stderr io.Writer) (redisLoad, error) {
	var l redisLoad
	fs := flag.NewFlagSet("ceiling redis", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&l.url, "redis", "redis://127.0.0.1:6379", "Redis URL")
	fs.StringVar(&l.prefix, "prefix", "launchdarkly", "key prefix of the Big Segments data")
	fs.IntVar(&l.contexts, "contexts", 1_000_000, "contexts seeded: user-0 … user-(n-1)")
	fs.IntVar(&l.workers, "workers", 64, "concurrent readers (and pool size)")
	fs.DurationVar(&l.duration, "duration", 6*time.Second, "how long to run")
	fs.Uint64Var(&l.seed, "seed", 1, "seed of the random contexts")
	return l, fs.Parse(args)
}

// loadRedis makes bigseg's cache-miss reads for uniformly random contexts from -workers
// goroutines for -duration, and prints the summary in the form of the benchmark's wrk script.
func loadRedis(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	l, err := parseRedisLoad(args, stderr)
	if err != nil {
		return err
	}
	opts, err := goredis.ParseURL(l.url)
	if err != nil {
		return err
	}
	opts.PoolSize, opts.Protocol = l.workers, 2 // RESP2, as bigseg
	client := goredis.NewClient(opts)
	defer client.Close()

	start := time.Now()
	latencies, failed := l.read(ctx, client)
	elapsed := time.Since(start)
	total := len(latencies)
	if total == 0 {
		return fmt.Errorf("no reads in %s", elapsed)
	}
	fmt.Fprintf(stdout, `BENCHJSON {"total":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"non2xx":0,"errors":%d}`+"\n",
		total, elapsed.Microseconds(), latencies[total/2].Microseconds(), latencies[total*99/100].Microseconds(), failed)
	return nil
}

// read runs the workers for the duration and returns the sorted latencies of the reads and
// how many failed.
func (l redisLoad) read(ctx context.Context, client *goredis.Client) ([]time.Duration, int) {
	ctx, cancel := context.WithTimeout(ctx, l.duration)
	defer cancel()
	latencies := make([][]time.Duration, l.workers)
	errs := make([]int, l.workers)
	var wg sync.WaitGroup
	for w := range l.workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(l.seed, uint64(w)))
			for {
				t0 := time.Now()
				err := readMembership(ctx, client, l.prefix, rnd.IntN(l.contexts))
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
	all := slices.Concat(latencies...)
	slices.Sort(all)
	failed := 0
	for _, n := range errs {
		failed += n
	}
	return all, failed
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
