package main

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The overload scenario: a store slow for one environment, and more clients asking it for
// contexts no one asked before than bigseg can serve, while two well-behaved clients ask for
// something else. The server serves two environments of one Redis, "slow" and "fast"; the
// proxy delays the reads of slow's memberships only (fast's, and the status polls, pass at
// once). -clients clients (the load) each look up a new context of slow, again and again,
// without backing off (ldbigseg's store does not back off on 429 either: its next miss asks
// again), or, with -backoff, waiting a second after each 429. Beside them, each on a connection of its own, 100 lookups a second at most:
//
//   - hot: lookups of 100 contexts of slow, cached before the delay began;
//   - fast: lookups of contexts of fast that no one asked before (each a store read).
//
// Measured over -duration, after 2 s for the load to connect: each well-behaved client's
// lookups answered healthy and their latencies, the load's answers by status code, and the
// server's peak goroutines (go_goroutines on its operators' listener, every 100 ms), peak RSS
// (VmHWM) and CPU time. With -against, the two binaries run in turn, in alternating order.

// overloadResult is one binary's run.
type overloadResult struct {
	hot, fast  goodClient
	load       map[int]int64 // the load's answers by status code, 0 for no answer
	goroutines int           // peak
	rss        int64         // peak, in KiB
	cpu        time.Duration // during the measurement
}

// goodClient is what a well-behaved client saw: its lookups and the latencies of those
// answered healthy.
type goodClient struct {
	lookups int
	healthy []time.Duration
}

func (g goodClient) quantile(q float64) time.Duration {
	if len(g.healthy) == 0 {
		return 0
	}
	s := slices.Clone(g.healthy)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

func (g goodClient) String() string {
	return fmt.Sprintf("%d of %d healthy, median %v, p99 %v, max %v", len(g.healthy), g.lookups,
		g.quantile(0.5).Round(10*time.Microsecond), g.quantile(0.99).Round(10*time.Microsecond), g.quantile(1).Round(10*time.Microsecond))
}

func overload(bins []string, redisAddr string, delay, duration time.Duration, rounds, clients int) error {
	bins = slices.DeleteFunc(bins, func(b string) bool { return b == "" })
	results := make([][]overloadResult, len(bins))
	for r := range rounds {
		order := []int{0, 1}[:len(bins)]
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			res, err := overloadRun(bins[i], redisAddr, delay, duration, clients)
			if err != nil {
				return err
			}
			fmt.Printf("round %d, %s: hot: %v; fast: %v; load answers %v; peak goroutines %d, peak RSS %.1f MiB, CPU %v\n",
				r+1, bins[i], res.hot, res.fast, res.load, res.goroutines, float64(res.rss)/1024, res.cpu.Round(time.Millisecond))
			results[i] = append(results[i], res)
		}
	}
	if len(bins) == 2 {
		summarize(bins, results)
	}
	return nil
}

// overloadRun runs the scenario once against bin, on keys of its own.
func overloadRun(bin, redisAddr string, delay, duration time.Duration, clients int) (res overloadResult, err error) {
	base, ops, pid, p, stop, err := startOverload(bin, redisAddr)
	if err != nil {
		return res, err
	}
	defer stop()
	hot := &http.Client{Timeout: time.Minute}
	for i := range 100 {
		if code, _ := get(context.Background(), hot, base+"/environments/slow/memberships/hot-"+strconv.Itoa(i)); code != http.StatusOK {
			return res, fmt.Errorf("warming the hot contexts: %d", code)
		}
	}
	p.delay.Store(int64(delay))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var load sync.WaitGroup
	codes := startLoad(ctx, &load, base+"/environments/slow/memberships/load-", clients)
	time.Sleep(2 * time.Second) // for the load to connect
	cpu := cpuTime(pid)
	mctx, mstop := context.WithTimeout(ctx, duration)
	defer mstop()
	var good sync.WaitGroup
	good.Go(func() {
		res.hot = goodLookups(mctx, func(i int) string { return base + "/environments/slow/memberships/hot-" + strconv.Itoa(i%100) })
	})
	good.Go(func() {
		res.fast = goodLookups(mctx, func(i int) string { return base + "/environments/fast/memberships/fast-" + strconv.Itoa(i) })
	})
	good.Go(func() { res.goroutines = peakGoroutines(mctx, "http://"+ops+"/metrics") })
	good.Wait()
	res.cpu = cpuTime(pid) - cpu
	res.rss = vmHWM(pid)
	cancel()
	load.Wait()
	res.load = map[int]int64{}
	for code, n := range codes {
		if n := n.Load(); n > 0 {
			res.load[code] = n
		}
	}
	return res, nil
}

var backoff = flag.Bool("backoff", false, "overload: the load waits a second after each 429, as its Retry-After asks")

// startOverload starts bin on two environments of Redis at redisAddr, with prefixes of their
// own: slow, read through p, a proxy that delays its memberships' reads once its delay is set
// (none yet), and fast. It returns the API's URL, the operators' listener's address and the
// server's process id; stop kills the server and closes the proxy.
func startOverload(bin, redisAddr string) (base, ops string, pid int, p *proxy, stop func(), err error) {
	prefix := "bench-overload-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	slow, fast := prefix+"-slow", prefix+"-fast"
	for _, pre := range []string{slow, fast} { // a cursor: answers are cached for an hour
		if err = redisSet(redisAddr, pre+":big_segments_synchronized_on", strconv.FormatInt(time.Now().UnixMilli(), 10)); err != nil {
			return
		}
		if err = redisSet(redisAddr, pre+":big_segments_cursor", "1"); err != nil {
			return
		}
	}
	if p, err = startProxy(redisAddr, slow+":big_segment_", 0); err != nil {
		return
	}
	if ops, err = freeAddr(); err != nil {
		p.close()
		return
	}
	base, pid, stopServer, err := startServer(bin, "BIGSEG_REDIS_URL=redis://"+p.addr,
		"BIGSEG_ENVIRONMENTS=slow="+slow+",fast="+fast, "BIGSEG_METRICS_ADDR="+ops)
	if err != nil {
		p.close()
		return
	}
	return base, ops, pid, p, func() { stopServer(); p.close() }, nil
}

// startLoad starts n clients looking up contexts url+"0", url+"1", ... until ctx ends, and
// returns the counts of their answers by status code (0: no answer).
func startLoad(ctx context.Context, wg *sync.WaitGroup, url string, n int) map[int]*atomic.Int64 {
	codes := map[int]*atomic.Int64{}
	for _, c := range []int{0, 200, 429, 500, 503, 504} {
		codes[c] = new(atomic.Int64)
	}
	other := codes[500]
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}, Timeout: time.Minute}
	var next atomic.Int64
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				code, _ := get(ctx, client, url+strconv.FormatInt(next.Add(1), 10))
				if ctx.Err() != nil {
					return // cut short: not counted
				}
				cmp.Or(codes[code], other).Add(1)
				if code == http.StatusTooManyRequests && *backoff {
					select { // as Retry-After: 1 asks
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			}
		})
	}
	return codes
}

// goodLookups looks up url(0), url(1), ... one at a time, at most 100 a second, until ctx ends.
func goodLookups(ctx context.Context, url func(int) string) goodClient {
	var g goodClient
	client := &http.Client{Timeout: time.Minute}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return g
		case <-tick.C:
		}
		start := time.Now()
		code, healthy := get(ctx, client, url(i))
		if ctx.Err() != nil {
			return g // cut short: not counted
		}
		g.lookups++
		if code == http.StatusOK && healthy {
			g.healthy = append(g.healthy, time.Since(start))
		}
	}
}

// get asks for url: its status code (0 if none came) and whether the answer said HEALTHY.
func get(ctx context.Context, client *http.Client, url string) (int, bool) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, err == nil && strings.Contains(string(body), `"status":"HEALTHY"`)
}

// peakGoroutines reads go_goroutines from url every 100 ms until ctx ends: the highest.
func peakGoroutines(ctx context.Context, url string) int {
	peak := 0
	for ctx.Err() == nil {
		if resp, err := http.Get(url); err == nil {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
					n, _ := strconv.ParseFloat(v, 64)
					peak = max(peak, int(n))
				}
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return peak
}

// cpuTime is the user and system time of process pid (Linux).
func cpuTime(pid int) time.Duration {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])) // the name may hold spaces
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// vmHWM is process pid's peak RSS, in KiB (Linux).
func vmHWM(pid int) int64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// summarize prints each figure of both binaries round by round, and the second's over the
// first's: the mean of the rounds' ratios and their range.
func summarize(bins []string, results [][]overloadResult) {
	fmt.Printf("\nB/A, with A = %s and B = %s: the mean of the rounds' ratios (their range)\n", bins[0], bins[1])
	share := func(g goodClient) float64 { return float64(len(g.healthy)) / float64(max(g.lookups, 1)) }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	figures := []struct {
		name string
		of   func(overloadResult) float64
	}{
		{"hot: share answered healthy", func(r overloadResult) float64 { return share(r.hot) }},
		{"hot: median ms", func(r overloadResult) float64 { return ms(r.hot.quantile(0.5)) }},
		{"hot: p99 ms", func(r overloadResult) float64 { return ms(r.hot.quantile(0.99)) }},
		{"fast: share answered healthy", func(r overloadResult) float64 { return share(r.fast) }},
		{"fast: median ms", func(r overloadResult) float64 { return ms(r.fast.quantile(0.5)) }},
		{"fast: p99 ms", func(r overloadResult) float64 { return ms(r.fast.quantile(0.99)) }},
		{"peak goroutines", func(r overloadResult) float64 { return float64(r.goroutines) }},
		{"peak RSS MiB", func(r overloadResult) float64 { return float64(r.rss) / 1024 }},
		{"CPU s", func(r overloadResult) float64 { return r.cpu.Seconds() }},
	}
	for _, f := range figures {
		var a, b []string
		var ratios []float64
		for i := range min(len(results[0]), len(results[1])) {
			x, y := f.of(results[0][i]), f.of(results[1][i])
			a, b = append(a, fmt.Sprintf("%.3g", x)), append(b, fmt.Sprintf("%.3g", y))
			if x > 0 {
				ratios = append(ratios, y/x)
			}
		}
		line := fmt.Sprintf("%-30s A %s; B %s", f.name, strings.Join(a, " "), strings.Join(b, " "))
		if len(ratios) > 0 {
			var sum float64
			for _, r := range ratios {
				sum += r
			}
			line += fmt.Sprintf("; B/A %.3g (%.3g-%.3g)", sum/float64(len(ratios)), slices.Min(ratios), slices.Max(ratios))
		}
		fmt.Println(line)
	}
}
