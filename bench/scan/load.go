package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
)

// loadResult is one paced run: requests answered and their latencies.
type loadResult struct {
	requests int64
	p50, p99 time.Duration
}

// paced sends GET /memberships/user-K at rate requests a second in all for d, over conns
// keep-alive connections (hotget's request, paced: each connection sends at rate/conns, on a
// fixed schedule, catching up when late), K from key; it fails on any answer but 200. A
// latency is from the request's write to its answer's end (a request sent late because the
// one before was slow does not count the wait: the rate is moderate, and the schedule is
// reported kept or not by the requests answered).
func paced(addr string, rate, conns int, d time.Duration, key func(r *rand.Rand) int) (loadResult, error) {
	lat := make([][]time.Duration, conns)
	var g errgroup.Group
	start := time.Now().Add(10 * time.Millisecond)
	every := time.Duration(int64(time.Second) * int64(conns) / int64(rate))
	for c := range conns {
		g.Go(func() error {
			r := rand.New(rand.NewPCG(uint64(c), uint64(start.UnixNano())))
			first := start.Add(every * time.Duration(c) / time.Duration(conns))
			var err error
			lat[c], err = sendPaced(addr, first, every, start.Add(d), func() int { return key(r) })
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return loadResult{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return loadResult{}, fmt.Errorf("no request answered")
	}
	return loadResult{requests: int64(len(all)), p50: all[len(all)/2], p99: all[len(all)*99/100]}, nil
}

// sendPaced sends one request at first, then one every interval until end, on one connection.
func sendPaced(addr string, first time.Time, every time.Duration, end time.Time, key func() int) ([]time.Duration, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	var lat []time.Duration
	for next := first; next.Before(end); next = next.Add(every) {
		time.Sleep(time.Until(next))
		t := time.Now()
		if _, err := fmt.Fprintf(conn, "GET /memberships/user-%d HTTP/1.1\r\nHost: bench\r\n\r\n", key()); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET user: %s", resp.Status)
		}
		lat = append(lat, time.Since(t))
	}
	return lat, nil
}
