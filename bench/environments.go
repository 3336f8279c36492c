package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bigseg/bigseg/segments"
	goredis "github.com/redis/go-redis/v9"
)

// With -baseline-environments N, the baseline is the current tree serving N environments of
// one Redis, as one Relay Proxy writes them: env0 is the bench's prefix, with every seeded
// context, and env1 … env(N-1) have a prefix each, synchronized but empty. Its lookups go to
// /environments/env0/, and its cache bound is N times the configuration's, so that env0's
// share is what the one-environment server has: the A/B measures the routing and the other
// environments' pollers, not a smaller cache.

// environmentPrefix is the key prefix of environment i.
func environmentPrefix(i int) string {
	if i == 0 {
		return prefix
	}
	return prefix + "-env" + strconv.Itoa(i)
}

// environmentsSetting is BIGSEG_ENVIRONMENTS for n environments.
func environmentsSetting(n int) string {
	pairs := make([]string, n)
	for i := range n {
		pairs[i] = "env" + strconv.Itoa(i) + "=" + environmentPrefix(i)
	}
	return strings.Join(pairs, ",")
}

// environmentsEnv is the environment of a server that serves n environments in config.
func environmentsEnv(n int, config string) []string {
	size := segments.DefaultCacheSize
	for _, kv := range bigsegCache[config] {
		if v, ok := strings.CutPrefix(kv, "BIGSEG_CACHE_SIZE="); ok {
			size, _ = strconv.Atoi(v)
		}
	}
	return []string{"BIGSEG_ENVIRONMENTS=" + environmentsSetting(n), "BIGSEG_CACHE_SIZE=" + strconv.Itoa(size*n)}
}

// syncedOnKeys are the synchronization times the synchronizer keeps fresh: every
// environment's.
func syncedOnKeys(n int) []string {
	keys := make([]string, max(n, 1))
	for i := range keys {
		keys[i] = environmentPrefix(i) + ":big_segments_synchronized_on"
	}
	return keys
}

// seedEnvironments writes the cursor and synchronization time of environments 1 … n-1.
func seedEnvironments(ctx context.Context, c *goredis.Client, n int) error {
	pipe := c.Pipeline()
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for i := 1; i < n; i++ {
		pipe.Set(ctx, environmentPrefix(i)+":big_segments_cursor", "bench-"+now, 0)
		pipe.Set(ctx, environmentPrefix(i)+":big_segments_synchronized_on", now, 0)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// idleResult is one server at rest: its resident memory, and what its polling costs Redis.
type idleResult struct {
	environments      int
	rssBytes          int64
	commandsPerSecond float64 // Redis commands processed, less those of the window with no server
	readsPerSecond    float64 // Redis read events (total_reads_processed): round trips, less the same
	pollInterval      time.Duration
	window            time.Duration
	noServerCommands  float64 // per second, the window with no server: the measurement's own
	noServerReads     float64
}

// Settings of the idle measurement: a short poll interval, so that a window holds many ticks.
const (
	idlePoll   = time.Second
	idleWindow = 10 * time.Second
	idleSettle = 3 * time.Second
)

// measureIdle starts the current tree's server with 1 and with n environments, one after the
// other, each at its default settings but for a poll every second, lets it settle, and
// measures over a window its RSS and the Redis commands and read events per second; a window
// with no server first gives what the measurement itself costs. The synchronizer must be
// stopped: its writes would count.
func (b *bench) measureIdle(ctx context.Context, n int) ([]idleResult, error) {
	none, err := b.redisRates(ctx)
	if err != nil {
		return nil, err
	}
	var out []idleResult
	for _, envs := range []int{1, n} {
		logf("idle: %d environment(s), %s window", envs, idleWindow)
		v := variant{label: "bigseg-idle-" + strconv.Itoa(envs), bin: b.bins.server, environments: envs,
			env: []string{"BIGSEG_STATUS_POLL_INTERVAL=" + idlePoll.String()}}
		p, err := b.startBigseg(ctx, v, "defaults")
		if err != nil {
			return nil, err
		}
		time.Sleep(idleSettle) // a measurement window at rest, not a synchronization
		rates, err := b.redisRates(ctx)
		rss := residentBytes(p.pid())
		p.stop()
		if err != nil {
			return nil, err
		}
		out = append(out, idleResult{environments: envs, rssBytes: rss, pollInterval: idlePoll, window: idleWindow,
			commandsPerSecond: rates[0] - none[0], readsPerSecond: rates[1] - none[1], noServerCommands: none[0], noServerReads: none[1]})
	}
	return out, nil
}

// redisRates is Redis's commands and read events per second over idleWindow.
func (b *bench) redisRates(ctx context.Context) ([2]float64, error) {
	before, err := redisStats(ctx, b.redis.client)
	if err != nil {
		return [2]float64{}, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return [2]float64{}, ctx.Err()
	case <-time.After(idleWindow):
	}
	after, err := redisStats(ctx, b.redis.client)
	if err != nil {
		return [2]float64{}, err
	}
	secs := time.Since(start).Seconds()
	return [2]float64{float64(after[0]-before[0]) / secs, float64(after[1]-before[1]) / secs}, nil
}

// redisStats is INFO stats' total_commands_processed and total_reads_processed.
func redisStats(ctx context.Context, c *goredis.Client) ([2]int64, error) {
	info, err := c.Info(ctx, "stats").Result()
	if err != nil {
		return [2]int64{}, err
	}
	var out [2]int64
	found := 0
	for line := range strings.Lines(info) {
		for i, name := range []string{"total_commands_processed:", "total_reads_processed:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name); ok {
				if out[i], err = strconv.ParseInt(v, 10, 64); err != nil {
					return out, err
				}
				found++
			}
		}
	}
	if found != 2 {
		return out, fmt.Errorf("INFO stats lacks total_commands_processed or total_reads_processed")
	}
	return out, nil
}

// residentBytes is a process's VmRSS, or 0 if it cannot be read.
func residentBytes(pid int) int64 {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// writeEnvironments reports the idle measurement.
func (r *report) writeEnvironments(b *strings.Builder) {
	if len(r.idle) != 2 {
		return
	}
	one, many := r.idle[0], r.idle[1]
	fmt.Fprintf(b, "\nAt rest, one server at a time, defaults but for a status poll every %s; Redis's counters over %s "+
		"(INFO stats; the window with no server, %.1f commands/s and %.1f read events/s, taken off):\n\n"+
		"| environments | RSS | Redis commands/s | per poll | Redis read events (round trips)/s | per poll |\n|---:|---:|---:|---:|---:|---:|\n",
		one.pollInterval, one.window, one.noServerCommands, one.noServerReads)
	for _, x := range r.idle {
		ticks := x.pollInterval.Seconds()
		fmt.Fprintf(b, "| %d | %.1f MiB | %.1f | %.1f | %.2f | %.2f |\n", x.environments, float64(x.rssBytes)/(1<<20),
			x.commandsPerSecond, x.commandsPerSecond*ticks, x.readsPerSecond, x.readsPerSecond*ticks)
	}
	if many.environments > one.environments {
		fmt.Fprintf(b, "\nRSS per environment beyond the first: %.1f KiB.\n",
			float64(many.rssBytes-one.rssBytes)/float64(many.environments-one.environments)/1024)
	}
}
