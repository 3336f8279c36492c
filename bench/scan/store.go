package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/segments"
)

const prefix = "launchdarkly" // bigseg's default BIGSEG_PREFIX

// startRedis starts a private redis-server on addr, without persistence, pinned to cpus, and
// waits until it answers.
func startRedis(ctx context.Context, addr, cpus string) (*exec.Cmd, *goredis.Client, error) {
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.CommandContext(ctx, "taskset", "-c", cpus, "redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start redis-server: %w", err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	for range 100 {
		if c.Ping(ctx).Err() == nil {
			return cmd, c, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return nil, nil, fmt.Errorf("redis-server on %s did not answer", addr)
}

// membership is context i's refs: 1 to 3 of the segments (i%3 + 1), picked by a hash of i;
// every 10th context excludes its first ref instead of including it (so a third of those,
// with one ref, are in no include set), and every 25th (i%25 == 1) has its first ref in both.
func membership(i, nSegments int) (inc, exc []any) {
	x := uint64(i)
	for j := range i%3 + 1 {
		x = splitmix(x)
		ref := "segment-" + strconv.Itoa(int(x%uint64(nSegments))) + ".g1"
		switch {
		case j == 0 && i%10 == 0:
			exc = append(exc, ref)
		case j == 0 && i%25 == 1:
			inc, exc = append(inc, ref), append(exc, ref)
		default:
			inc = append(inc, ref)
		}
	}
	return inc, exc
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// seed writes contexts user-0 ... user-(n-1) in the Relay Proxy's layout, from 4 connections in
// pipelines of 1,000 contexts, then synchronized_on and the cursor.
func seed(ctx context.Context, c *goredis.Client, n, nSegments int) error {
	const workers, batch = 4, 1000
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for from := w * batch; from < n; from += workers * batch {
				pipe := c.Pipeline()
				for i := from; i < min(from+batch, n); i++ {
					hash := segments.Hash("user-" + strconv.Itoa(i))
					inc, exc := membership(i, nSegments)
					if len(inc) > 0 {
						pipe.SAdd(ctx, prefix+":big_segment_include:"+hash, inc...)
					}
					if len(exc) > 0 {
						pipe.SAdd(ctx, prefix+":big_segment_exclude:"+hash, exc...)
					}
				}
				if _, err := pipe.Exec(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	return c.MSet(ctx, prefix+":big_segments_synchronized_on", now, prefix+":big_segments_cursor", "bench-"+now).Err()
}

// resetLease deletes the inventory's lease and stored result, so that the next server started
// takes the lease and scans at once (a stopped one's lease would last an interval and a half).
func resetLease(ctx context.Context, c *goredis.Client) error {
	return c.Del(ctx, prefix+":bigseg_inventory_lease", prefix+":bigseg_inventory").Err()
}

// redisCPU is Redis's own user plus system CPU time (INFO cpu, microsecond resolution).
func redisCPU(ctx context.Context, c *goredis.Client) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// commandCalls is INFO commandstats's calls by command (lower case).
func commandCalls(ctx context.Context, c *goredis.Client) (map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for line := range strings.Lines(info) {
		// cmdstat_smembers:calls=2,usec=...
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats %s: %w", name, err)
		}
		out[name] = n
	}
	return out, nil
}

// delta is after's calls minus before's, by command, leaving out those that did not change.
func delta(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// synchronize plays the Relay Proxy at rest: it writes synchronized_on every 30 s, so that the
// data never turns stale during a long run, until the function it returns is called.
func synchronize(ctx context.Context, c *goredis.Client) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				c.Set(ctx, prefix+":big_segments_synchronized_on", strconv.FormatInt(now.UnixMilli(), 10), 0)
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}
