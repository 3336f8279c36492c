package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// bench is the Redis every phase runs against.
type bench struct {
	o     options
	addr  string
	redis *goredis.Client
}

func run(ctx context.Context, o options) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // kills redis-server (exec.CommandContext)
	cmd, c, err := startRedis(ctx, addr, o.redisCPUs)
	if err != nil {
		return err
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	defer c.Close()
	start := time.Now()
	if err := seed(ctx, c, o.contexts, o.segments); err != nil {
		return err
	}
	logf("wrote %d contexts over %d refs in %s", o.contexts, o.segments, time.Since(start).Round(time.Millisecond))
	b := &bench{o: o, addr: addr, redis: c}
	defer synchronize(ctx, c)()
	for _, p := range strings.Split(o.phases, ",") {
		var err error
		switch p {
		case "full":
			err = b.full(ctx)
		case "sample":
			err = b.sample(ctx)
		case "rounds":
			err = b.rounds(ctx, b.o.scanRate)
		case "rounds-full":
			err = b.rounds(ctx, b.o.fullRate)
		default:
			err = fmt.Errorf("unknown phase %q (full, sample, rounds, rounds-full)", p)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// url is the Redis URL the servers are given, with -redis-params.
func (b *bench) url() string {
	u := "redis://" + b.addr
	if b.o.redisParams != "" {
		u += "?" + b.o.redisParams
	}
	return u
}

// snapshot is the counters a measurement takes the difference of.
type snapshot struct {
	at        time.Time
	server    time.Duration
	redis     time.Duration
	commands  map[string]int64
	serverRSS int64
}

func (b *bench) snap(ctx context.Context, s *server) (snapshot, error) {
	sn, err := b.snapRedis(ctx)
	if err != nil {
		return sn, err
	}
	if sn.server, err = cpuTime(s.pid()); err != nil {
		return sn, err
	}
	sn.serverRSS, err = rss(s.pid())
	return sn, err
}

// snapRedis is a snapshot of Redis's counters alone.
func (b *bench) snapRedis(ctx context.Context) (snapshot, error) {
	sn := snapshot{at: time.Now()}
	var err error
	if sn.redis, err = redisCPU(ctx, b.redis); err != nil {
		return sn, err
	}
	sn.commands, err = commandCalls(ctx, b.redis)
	return sn, err
}

// report prints what a scan of n contexts between from and to cost.
// rest is a server's CPU a second when it does not scan, which the figures net of rest subtract.
func report(name string, n int64, wall time.Duration, from, to snapshot, peakRSS, idleRSS int64, rest time.Duration) {
	per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(n) * 1e3 } // ms per 1,000
	fmt.Printf("## %s\n", name)
	fmt.Printf("contexts scanned: %d in %.1f s: %.0f contexts/s\n", n, wall.Seconds(), float64(n)/wall.Seconds())
	fmt.Printf("server CPU: %.2f s, %.2f ms per 1,000 contexts (%.1f%% of a core)\n", (to.server - from.server).Seconds(),
		per(to.server-from.server), 100*(to.server-from.server).Seconds()/wall.Seconds())
	net := to.server - from.server - time.Duration(float64(rest)*wall.Seconds())
	fmt.Printf("server CPU net of its rest (%.1f ms/s): %.2f ms per 1,000 contexts\n", micros(rest)/1000, per(net))
	fmt.Printf("Redis CPU: %.2f s, %.2f ms per 1,000 contexts (%.1f%% of a core)\n", (to.redis - from.redis).Seconds(),
		per(to.redis-from.redis), 100*(to.redis-from.redis).Seconds()/wall.Seconds())
	fmt.Printf("server RSS: %.1f MiB without a scan, %.1f MiB peak during it\n", mib(idleRSS), mib(peakRSS))
	d := delta(from.commands, to.commands)
	var total int64
	for _, k := range slices.Sorted(maps.Keys(d)) {
		total += d[k]
		fmt.Printf("  redis %s: %d calls, %.3f per context\n", k, d[k], float64(d[k])/float64(n))
	}
	fmt.Printf("  redis commands in all: %.3f per context\n\n", float64(total)/float64(n))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// idle is the RSS of a server that does not scan, 2 s after it answers (after 1,000
// lookups), and its CPU at rest (status polls, the runtime), a second, over the next 10 s.
func (b *bench) idle(ctx context.Context) (int64, time.Duration, error) {
	s, err := startServer(ctx, b.o.server, b.o.serverCPUs, b.url(), 0, 1000)
	if err != nil {
		return 0, 0, err
	}
	defer s.stop()
	if _, err := paced(s.addr, 1000, 4, time.Second, func(r *rand.Rand) int { return r.IntN(1000) }); err != nil {
		return 0, 0, err
	}
	time.Sleep(time.Second)
	r, err := rss(s.pid())
	if err != nil {
		return 0, 0, err
	}
	from, err := cpuTime(s.pid())
	if err != nil {
		return 0, 0, err
	}
	time.Sleep(10 * time.Second)
	to, err := cpuTime(s.pid())
	return r, (to - from) / 10, err
}
