package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Scenario and system names, as the report shows them.
const (
	sysChi     = "bare chi (HTTP ceiling)"
	sysRedis   = "go-redis, 2 SMEMBERS pipelined (Redis ceiling)"
	sysHot     = "bigseg hot"
	sysCold    = "bigseg cold"
	sysBatch   = "bigseg batch of 100"
	hotKeys    = 1000
	batchSize  = 100
	stormCalls = 1000
)

// measure runs every scenario, alternating systems within each round, and fills r.
func measure(ctx context.Context, o options, d *dataset, serverBin, ceilingBin, tmp string, r *report) error {
	common := []string{"BIGSEG_REDIS_URL=" + o.redisURL, "BIGSEG_PREFIX=" + d.prefix, "BIGSEG_LOG_LEVEL=warn",
		"BIGSEG_SHUTDOWN_DELAY=0s", "BIGSEG_MAX_BATCH=1000"}
	start := func(name string, env ...string) (*proc, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		pprofAddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		env = append(append(append(common, env...), o.env...), "BIGSEG_ADDR="+addr, "BIGSEG_PPROF_ADDR="+pprofAddr)
		p, err := startProc(ctx, name, serverBin, env, nil, addr, "/readyz")
		if p != nil {
			p.pprof = "http://" + pprofAddr
		}
		return p, err
	}
	hot, err := start("bigseg-hot", "BIGSEG_CACHE_SIZE=100000", "BIGSEG_CACHE_TTL=1h")
	if err != nil {
		return err
	}
	defer hot.stop()
	cold, err := start("bigseg-cold", "BIGSEG_CACHE_SIZE=0")
	if err != nil {
		return err
	}
	defer cold.stop()

	// The ceiling's body is as long as bigseg's answer for a typical context.
	resp, err := http.Get(hot.url + "/memberships/user-1")
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.bodySize = len(body)
	chiAddr, err := freeAddr()
	if err != nil {
		return err
	}
	chi, err := startProc(ctx, "ceiling", ceilingBin, nil, []string{"-addr", chiAddr, "-body-size", strconv.Itoa(len(body))}, chiAddr, "/memberships/x")
	if err != nil {
		return err
	}
	defer chi.stop()

	// Warm the hot server's cache with the hot keys.
	for i := range hotKeys {
		if resp, err := http.Get(hot.url + "/memberships/user-" + strconv.Itoa(i)); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}

	for round := 1; round <= o.rounds; round++ {
		logf("round %d of %d", round, o.rounds)
		type step struct {
			system     string
			p          *proc
			script     string
			perRequest int
			path       string
		}
		steps := []step{
			{sysChi, chi, wrkGetRandom(hotKeys), 1, ""},
			{sysHot, hot, wrkGetRandom(hotKeys), 1, "/memberships/{contextKey}"},
			{sysCold, cold, wrkGetRandom(d.n), 1, "/memberships/{contextKey}"},
			{sysBatch, cold, wrkPostBatch(d.n, batchSize), batchSize, "/memberships"},
			{sysRedis, nil, "", 1, ""},
		}
		if round%2 == 0 {
			// Every other round runs backwards (ABBA), so that a machine growing faster or
			// slower during the run favours no system.
			slices.Reverse(steps)
		}
		for _, st := range steps {
			if st.p == nil {
				logf("  %s", sysRedis)
				res, err := redisCeiling(ctx, o, d)
				if err != nil {
					return err
				}
				r.add(measurement{system: sysRedis, result: res})
				continue
			}
			var before counters
			if st.path != "" {
				if before, err = readCounters(ctx, st.p, d, st.path); err != nil {
					return err
				}
			}
			logf("  %s", st.system)
			cpu0 := cpuTime(st.p)
			res, err := runWrk(ctx, o, tmp, st.p.url, st.script, st.perRequest)
			if err != nil {
				return err
			}
			m := measurement{system: st.system, result: res}
			if res.Total > 0 {
				m.cpuPerRequest = (cpuTime(st.p) - cpu0) / time.Duration(res.Total)
			}
			if st.path != "" {
				after, err := settledCounters(ctx, st.p, d, st.path)
				if err != nil {
					return err
				}
				m.counters = after.sub(before)
			}
			r.add(m)
		}
	}

	if o.profile {
		// A pass of its own, after the measured rounds: profiling slows what it profiles.
		for _, st := range []struct {
			system, script string
			p              *proc
			perRequest     int
		}{
			{sysHot, wrkGetRandom(hotKeys), hot, 1}, {sysCold, wrkGetRandom(d.n), cold, 1}, {sysBatch, wrkPostBatch(d.n, batchSize), cold, batchSize},
		} {
			logf("profiling %s", st.system)
			prof := profile(st.p, o.duration-2*time.Second, serverBin, filepath.Join(o.outDir, profileName(st.system)))
			if _, err := runWrk(ctx, o, tmp, st.p.url, st.script, st.perRequest); err != nil {
				return err
			}
			pr := <-prof
			if pr.err != nil {
				logf("profile: %v", pr.err)
			}
			r.profiles = append(r.profiles, namedProfile{st.system, pr.top})
		}
	}

	logf("storm: %d concurrent requests for one uncached key", stormCalls)
	r.storm, err = storm(ctx, hot, d)
	return err
}

// cpuTime is the user and system CPU time the process has used (Linux /proc), or 0.
func cpuTime(p *proc) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// counters are the server-side figures that show round trips.
type counters struct {
	requests, lookups, storeReads, smembers float64
}

func readCounters(ctx context.Context, p *proc, d *dataset, route string) (counters, error) {
	var c counters
	var err error
	if c.requests, err = p.metric("bigseg_http_requests_total", "route", route, "code", "200"); err != nil {
		return c, err
	}
	if c.lookups, err = p.metric("bigseg_membership_lookups_total"); err != nil {
		return c, err
	}
	if c.storeReads, err = p.metric("bigseg_store_request_duration_seconds", "operation", "memberships"); err != nil {
		return c, err
	}
	n, err := commandCalls(ctx, d, "smembers")
	c.smembers = float64(n)
	return c, err
}

// settledCounters reads the counters once requests still in flight when wrk stopped have
// finished: two reads in a row agree.
func settledCounters(ctx context.Context, p *proc, d *dataset, route string) (counters, error) {
	prev, err := readCounters(ctx, p, d, route)
	for range 50 {
		if err != nil {
			return prev, err
		}
		time.Sleep(20 * time.Millisecond)
		var c counters
		if c, err = readCounters(ctx, p, d, route); err == nil && c == prev {
			return c, nil
		}
		prev = c
	}
	return prev, err
}

func (c counters) sub(o counters) counters {
	return counters{c.requests - o.requests, c.lookups - o.lookups, c.storeReads - o.storeReads, c.smembers - o.smembers}
}

// redisCeiling runs the same reads bigseg makes on a miss (two SMEMBERS, pipelined, for a
// random context) from o.connections goroutines of a minimal go-redis client.
func redisCeiling(ctx context.Context, o options, d *dataset) (result, error) {
	opts, _ := goredis.ParseURL(o.redisURL)
	opts.PoolSize = o.connections
	c := goredis.NewClient(opts)
	defer c.Close()
	inc, exc := d.prefix+":big_segment_include:", d.prefix+":big_segment_exclude:"
	deadline := time.Now().Add(o.duration)
	var total, failed atomic.Int64
	lat := make([][]time.Duration, o.connections)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range o.connections {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for time.Now().Before(deadline) {
				h := d.hashes[rnd.IntN(len(d.hashes))]
				t0 := time.Now()
				pipe := c.Pipeline()
				a, b := pipe.SMembers(ctx, inc+h), pipe.SMembers(ctx, exc+h)
				if _, err := pipe.Exec(ctx); err != nil || a.Err() != nil || b.Err() != nil {
					failed.Add(1)
				}
				lat[w] = append(lat[w], time.Since(t0))
				total.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	res := result{Requests: float64(total.Load()) / elapsed.Seconds(), Errors: failed.Load(), Total: total.Load()}
	res.Lookups = res.Requests
	if len(all) > 0 {
		res.P50, res.P99 = all[len(all)/2], all[len(all)*99/100]
	}
	return res, nil
}

// stormResult is what the storm scenario shows.
type stormResult struct {
	requests, ok, storeReads int
	elapsed                  time.Duration
}

// storm fires stormCalls concurrent requests for one context no one asked for before, and
// counts the store reads they cost.
func storm(ctx context.Context, p *proc, d *dataset) (stormResult, error) {
	key := "user-" + strconv.Itoa(d.n-1-rand.IntN(1000)) // seeded, never in the hot set
	before, err := p.metric("bigseg_store_request_duration_seconds", "operation", "memberships")
	if err != nil {
		return stormResult{}, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: stormCalls, MaxConnsPerHost: 0}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	// Open the connections first, so the requests themselves go out together.
	var warm sync.WaitGroup
	for range stormCalls {
		warm.Go(func() {
			if resp, err := client.Get(p.url + "/livez"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	warm.Wait()
	gate := make(chan struct{})
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range stormCalls {
		wg.Go(func() {
			<-gate
			resp, err := client.Get(p.url + "/memberships/" + key)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(string(b), `"status":"HEALTHY"`) {
				ok.Add(1)
			}
		})
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	elapsed := time.Since(start)
	after, err := p.metric("bigseg_store_request_duration_seconds", "operation", "memberships")
	return stormResult{requests: stormCalls, ok: int(ok.Load()), storeReads: int(after - before), elapsed: elapsed}, err
}

type profileResult struct {
	top string
	err error
}

type namedProfile struct{ system, top string }

func profileName(system string) string {
	return "profile-" + strings.ReplaceAll(strings.Fields(system)[1], "/", "-") + ".txt"
}

// profile takes a CPU profile of p for d while a measurement runs, and returns the top of
// `go tool pprof -top`.
func profile(p *proc, d time.Duration, bin, out string) chan profileResult {
	ch := make(chan profileResult, 1)
	go func() {
		time.Sleep(time.Second) // let the load ramp up; this is the measurement's timing, not a test's
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.pprof, int(d.Seconds())))
		if err != nil {
			ch <- profileResult{err: err}
			return
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pf := out + ".pprof"
		if err := os.WriteFile(pf, raw, 0o644); err != nil {
			ch <- profileResult{err: err}
			return
		}
		top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=12", bin, pf).CombinedOutput()
		if err != nil {
			ch <- profileResult{err: fmt.Errorf("pprof: %v\n%s", err, top)}
			return
		}
		_ = os.WriteFile(out, top, 0o644)
		ch <- profileResult{top: string(top)}
	}()
	return ch
}

var memRe = regexp.MustCompile(`([0-9.]+) heap-bytes/context`)

// measureMemory runs the cache memory benchmark (1,000,000 contexts cached).
func measureMemory() (float64, error) {
	logf("memory: caching 1,000,000 contexts")
	out, err := exec.Command("go", "test", "-run", "^$", "-bench", "^BenchmarkCacheMemory$", "-benchtime", "1x", "./segments").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("memory benchmark: %v\n%s", err, out)
	}
	m := memRe.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("memory benchmark printed no figure:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}
