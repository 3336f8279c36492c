// Command abandon measures how a bigseg binary shares a slow store between well-behaved
// clients and others: clients that hang up before their answer, or that send large batches.
// It starts a proxy that delays every byte sent to Redis, the binary against it, the load of
// one scenario, and one well-behaved client making single lookups of uncached contexts beside
// it, and prints how many of that client's lookups failed and how many contexts bigseg read.
//
//	go build -o /tmp/server ./cmd/server
//	go run ./bench/abandon -bin /tmp/server -scenario hangup
//	go run ./bench/abandon -bin /tmp/server -scenario batches [BIGSEG_NAME=value ...]
//	go run ./bench/abandon -bin /tmp/a -against /tmp/b -scenario overload -delay 1s
//
// The overload scenario (overload.go) is the measure of a defence against overload: two
// binaries in alternating rounds, a well-behaved client's cached lookups and lookups of
// another environment beside many clients asking the slow one (bench/defences/run shed).
//
// It needs a Redis (-redis, 127.0.0.1:6379 by default), where it writes only the metadata of
// a prefix of its own, and imports nothing of bigseg, so that it can measure any tree's binary.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	bin := flag.String("bin", "", "bigseg server binary to measure")
	against := flag.String("against", "", "overload: a second binary, measured in alternating rounds with -bin")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis to put the delay in front of")
	delay := flag.Duration("delay", 300*time.Millisecond, "delay of every byte sent to Redis (overload: of the slow environment's reads)")
	scenario := flag.String("scenario", "hangup", "hangup: 200 clients hang up after 50 ms; batches: 100 clients send waiting batches of 100; overload: see overload.go")
	duration := flag.Duration("duration", 10*time.Second, "how long the load runs (overload: is measured)")
	rounds := flag.Int("rounds", 4, "overload: rounds, each binary once a round")
	clients := flag.Int("clients", 1500, "overload: clients of the load")
	flag.Parse()
	if *bin == "" || (*scenario != "hangup" && *scenario != "batches" && *scenario != "overload") {
		flag.Usage()
		os.Exit(2)
	}
	var err error
	if *scenario == "overload" {
		err = overload([]string{*bin, *against}, *redisAddr, *delay, *duration, *rounds, *clients)
	} else {
		err = run(*bin, *redisAddr, *delay, *scenario, *duration)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func run(bin, redisAddr string, delay time.Duration, scenario string, duration time.Duration) error {
	prefix := "bench-abandon-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := redisSet(redisAddr, prefix+":big_segments_synchronized_on", strconv.FormatInt(time.Now().UnixMilli(), 10)); err != nil {
		return err
	}
	p, err := startProxy(redisAddr, "", delay)
	if err != nil {
		return err
	}
	base, _, stop, err := startServer(bin, "BIGSEG_REDIS_URL=redis://"+p.addr, "BIGSEG_PREFIX="+prefix)
	if err != nil {
		return err
	}
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var next atomic.Int64 // distinct keys, 100,000 of them in turn
	key := func() string { return "ctx-" + strconv.FormatInt(next.Add(1)%100_000, 10) }
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	var wg sync.WaitGroup
	var others, othersAnswered atomic.Int64
	readBefore := p.smembers.Load()
	for range map[string]int{"hangup": 200, "batches": 100}[scenario] {
		wg.Go(func() {
			for ctx.Err() == nil {
				others.Add(1)
				if attackOnce(ctx, scenario, client, base, key) {
					othersAnswered.Add(1)
				}
			}
		})
	}
	var lookups, failed int
	var slowest time.Duration
	for ctx.Err() == nil {
		start := time.Now()
		if !lookup(context.Background(), client, base, key()) {
			failed++
		}
		lookups++
		slowest = max(slowest, time.Since(start))
	}
	wg.Wait()
	fmt.Printf("scenario %s, store %v away, %v: the well-behaved client failed %d of %d lookups (slowest %v); "+
		"the others' requests answered healthy %d of %d; contexts read %d, over %d connections to Redis\n",
		scenario, delay, duration, failed, lookups, slowest.Round(time.Millisecond), othersAnswered.Load(), others.Load(), (p.smembers.Load()-readBefore)/2, p.conns.Load())
	return nil
}

// attackOnce sends one of the scenario's requests (a lookup hung up after 50 ms, or a batch of
// 100 new contexts) and says whether it was answered.
func attackOnce(ctx context.Context, scenario string, client *http.Client, base string, key func() string) bool {
	if scenario == "hangup" {
		rctx, stop := context.WithTimeout(ctx, 50*time.Millisecond)
		defer stop()
		return lookup(rctx, client, base, key())
	}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = key()
	}
	return batch(ctx, client, base, keys)
}

// startServer starts bin on a free port with the settings env (NAME=value) and those given
// on the command line, on -server-cpu if set, and waits until it is ready; stop kills it.
func startServer(bin string, env ...string) (base string, pid int, stop func(), err error) {
	addr, err := freeAddr()
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(bin)
	if *serverCPU != "" {
		cmd = exec.Command("taskset", "-c", *serverCPU, bin) // taskset execs bin: same process
	}
	cmd.Env = append(os.Environ(), "BIGSEG_ADDR="+addr, "BIGSEG_LOG_LEVEL=error")
	cmd.Env = append(append(cmd.Env, env...), flag.Args()...) // more settings, as NAME=value
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	base = "http://" + addr
	if err := waitReady(base); err != nil {
		stop()
		return "", 0, nil, err
	}
	return base, cmd.Process.Pid, stop, nil
}

var serverCPU = flag.String("server-cpu", "", "run the server under taskset -c on these CPUs")

// lookup is GET /memberships/{key}: true if answered 200 with a healthy status.
func lookup(ctx context.Context, client *http.Client, base, key string) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/memberships/"+url.PathEscape(key), nil)
	var a struct{ Status, Error string }
	ok := do(client, req, &a) && a.Status == "HEALTHY"
	if !ok && ctx == context.Background() && *verbose {
		log.Printf("lookup failed: %s %s", a.Status, a.Error)
	}
	return ok
}

var verbose = flag.Bool("v", false, "log why each of the well-behaved client's lookups failed")

// batch is POST /memberships of keys: true if answered 200 with every context healthy.
func batch(ctx context.Context, client *http.Client, base string, keys []string) bool {
	body, _ := json.Marshal(map[string][]string{"contextKeys": keys})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/memberships", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	var a struct{ Results []struct{ Status string } }
	if !do(client, req, &a) || len(a.Results) != len(keys) {
		return false
	}
	for _, r := range a.Results {
		if r.Status != "HEALTHY" {
			return false
		}
	}
	return true
}

func do(client *http.Client, req *http.Request, into any) bool {
	resp, err := client.Do(req)
	if err != nil {
		if *verbose && req.Context() == context.Background() {
			log.Print(err)
		}
		return false
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(into)
	if *verbose && req.Context() == context.Background() && resp.StatusCode != http.StatusOK {
		log.Printf("%d %v", resp.StatusCode, into)
	}
	return resp.StatusCode == http.StatusOK && err == nil
}

func waitReady(base string) error {
	for range 300 {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("the server was not ready within 30 s")
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// redisSet sets key to value, on a connection of its own.
func redisSet(addr, key, value string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(value), value)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "+OK") {
		return fmt.Errorf("SET %s: %q %v", key, line, err)
	}
	return nil
}

// proxy forwards connections to Redis, each chunk sent to it delay after it arrived (the
// answers come back at once), or only the chunks that hold only, and counts the SMEMBERS
// commands sent.
type proxy struct {
	addr            string
	only            []byte
	delay           atomic.Int64 // a time.Duration
	close           func()       // stops accepting connections
	smembers, conns atomic.Int64
}

func startProxy(target, only string, delay time.Duration) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{addr: ln.Addr().String()}
	p.delay.Store(int64(delay))
	if only != "" {
		p.only = []byte(only)
	}
	p.close = func() { ln.Close() }
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.conns.Add(1)
			go p.serve(c, target)
		}
	}()
	return p, nil
}

func (p *proxy) serve(c net.Conn, target string) {
	defer c.Close()
	r, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer r.Close()
	go io.Copy(c, r)
	type chunk struct {
		b  []byte
		at time.Time
	}
	chunks := make(chan chunk, 1024)
	go func() {
		for ch := range chunks {
			time.Sleep(time.Until(ch.at))
			if _, err := r.Write(ch.b); err != nil {
				return
			}
		}
	}()
	defer close(chunks)
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			b := bytes.Clone(buf[:n])
			p.smembers.Add(int64(bytes.Count(bytes.ToUpper(b), []byte("SMEMBERS"))))
			delay := time.Duration(p.delay.Load())
			if p.only != nil && !bytes.Contains(b, p.only) {
				delay = 0 // still sent after the chunks before it
			}
			chunks <- chunk{b, time.Now().Add(delay)}
		}
		if err != nil {
			return
		}
	}
}
