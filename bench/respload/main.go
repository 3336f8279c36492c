// Command respload is bench/run's load generator for bigseg's Redis-protocol listener, as wrk
// is for its HTTP API: over -c connections for -d, each lookup of a context user-N is what an
// SDK's Redis Big Segment store sends, SMEMBERS of the context's include set and then, once
// answered, of its exclude set, on one connection. N is uniform over [0, -keys) or, with
// -zipf, read from a file of context indices (bench/zipf.go's), walked from -start by all
// connections together, so that the next run can go on where this one stopped. It prints the
// summary line bench/run's wrk scripts print (BENCHJSON, lookups counted as requests; an error
// reply counts as non2xx). It only dials the address it is given, and stops after -d.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type config struct {
	addr     string
	prefix   string
	conns    int
	duration time.Duration
	keys     int
	seed     uint64
	zipf     string
	start    int64
}

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:6380", "bigseg's Redis-protocol listener")
	flag.StringVar(&c.prefix, "prefix", "launchdarkly", "key prefix")
	flag.IntVar(&c.conns, "c", 64, "connections")
	flag.DurationVar(&c.duration, "d", 6*time.Second, "how long to send")
	flag.IntVar(&c.keys, "keys", 1000, "contexts user-0 ... user-(keys-1), drawn uniformly (without -zipf)")
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the uniform draws")
	flag.StringVar(&c.zipf, "zipf", "", "file of context indices, one a line, to walk instead")
	flag.Int64Var(&c.start, "start", 0, "where in the -zipf file to start")
	flag.Parse()
	s, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "respload:", err)
		os.Exit(1)
	}
	fmt.Printf("BENCHJSON {\"total\":%d,\"duration_us\":%d,\"p50_us\":%d,\"p99_us\":%d,\"non2xx\":%d,\"errors\":%d}\n",
		s.total, s.elapsed.Microseconds(), s.p50.Microseconds(), s.p99.Microseconds(), s.errorReplies, s.errors)
}

// summary is what a run did: lookups answered (both sets), within elapsed.
type summary struct {
	total, errorReplies, errors int64
	elapsed, p50, p99           time.Duration
}

func run(c config) (summary, error) {
	var keys []int32
	if c.zipf != "" {
		var err error
		if keys, err = readKeys(c.zipf); err != nil {
			return summary{}, err
		}
	}
	var (
		next            atomic.Int64 // the next place in keys
		total, errReply atomic.Int64
		failed          atomic.Int64
		mu              sync.Mutex
		latencies       []time.Duration
		wg              sync.WaitGroup
	)
	next.Store(c.start)
	start := time.Now()
	deadline := start.Add(c.duration)
	for id := range c.conns {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(c.seed, uint64(id)))
			pick := func() int {
				if keys != nil {
					return int(keys[(next.Add(1)-1)%int64(len(keys))])
				}
				return rnd.IntN(c.keys)
			}
			lat, answered, errs, err := lookups(c, deadline, pick)
			total.Add(answered)
			errReply.Add(errs)
			if err != nil {
				failed.Add(1)
				fmt.Fprintln(os.Stderr, "respload:", err)
			}
			mu.Lock()
			latencies = append(latencies, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	s := summary{total: total.Load(), errorReplies: errReply.Load(), errors: failed.Load(), elapsed: time.Since(start)}
	if s.total == 0 {
		return s, errors.New("no lookup answered")
	}
	slices.Sort(latencies)
	s.p50, s.p99 = latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	return s, nil
}

// lookups makes lookups on one connection until the deadline: the latency of each, and how
// many were answered, and with an error reply.
func lookups(c config, deadline time.Time, pick func() int) (lat []time.Duration, answered, errorReplies int64, err error) {
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		return nil, 0, 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline.Add(10 * time.Second))
	br, bw := bufio.NewReader(conn), bufio.NewWriter(conn)
	include, exclude := c.prefix+":big_segment_include:", c.prefix+":big_segment_exclude:"
	var cmd []byte
	for {
		t0 := time.Now()
		if !t0.Before(deadline) {
			return lat, answered, errorReplies, nil
		}
		hash := hashKey("user-" + strconv.Itoa(pick()))
		failed := false
		for _, set := range [2]string{include, exclude} {
			cmd = appendCommand(cmd[:0], "SMEMBERS", set+hash)
			if _, err := bw.Write(cmd); err != nil {
				return lat, answered, errorReplies, err
			}
			if err := bw.Flush(); err != nil {
				return lat, answered, errorReplies, err
			}
			isErr, err := readReply(br)
			if err != nil {
				return lat, answered, errorReplies, err
			}
			failed = failed || isErr
		}
		answered++
		if failed {
			errorReplies++
		}
		lat = append(lat, time.Since(t0))
	}
}

// hashKey is a context's hash in the Big Segments data: base64(SHA-256(key)).
func hashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return base64.StdEncoding.EncodeToString(h[:])
}

// appendCommand appends a command as a RESP array of bulk strings.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// readReply reads one RESP2 reply, saying whether it is an error reply.
func readReply(br *bufio.Reader) (isError bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return false, err
	}
	if len(line) < 3 {
		return false, fmt.Errorf("short reply line %q", line)
	}
	switch line[0] {
	case '-':
		return true, nil
	case '+', ':':
		return false, nil
	case '$':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil || n < 0 {
			return false, err
		}
		_, err = br.Discard(n + 2)
		return false, err
	case '*':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil {
			return false, err
		}
		for range n {
			if isErr, err := readReply(br); err != nil || isErr {
				return isErr, err
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("unexpected reply %q", line)
}

// readKeys reads a file of context indices, one a line.
func readKeys(path string) ([]int32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys []int32
	br := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 1 {
			k, perr := strconv.ParseInt(string(line[:len(line)-1]), 10, 32)
			if perr != nil {
				return nil, fmt.Errorf("%s: %w", path, perr)
			}
			keys = append(keys, int32(k))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no keys", path)
	}
	return keys, nil
}
