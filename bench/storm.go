package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stormResult is what the storm scenario shows.
type stormResult struct {
	label                    string
	requests, ok, storeReads int
	elapsed                  time.Duration
}

// storm fires stormCalls concurrent requests for one context that no one asked for before
// (stormKey(i)), on a server at its default settings, and counts the store reads they cost.
func storm(ctx context.Context, p *proc, i int) (stormResult, error) {
	logf("storm on %s: %d concurrent requests for one uncached key", p.name, stormCalls)
	key := stormKey(i)
	before, err := storeReads(ctx, p)
	if err != nil {
		return stormResult{}, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: stormCalls}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	// Open the connections first, so that the requests themselves go out together.
	var open sync.WaitGroup
	for range stormCalls {
		open.Go(func() { _, _ = answer(ctx, client, p.url+"/livez") })
	}
	open.Wait()
	gate := make(chan struct{})
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range stormCalls {
		wg.Go(func() {
			<-gate
			if body, err := answer(ctx, client, p.lookups+"/memberships/"+key); err == nil && strings.Contains(body, `"status":"HEALTHY"`) {
				ok.Add(1)
			}
		})
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	elapsed := time.Since(start)
	after, err := storeReads(ctx, p)
	return stormResult{requests: stormCalls, ok: int(ok.Load()), storeReads: int(after - before), elapsed: elapsed}, err
}

// answer returns the body of a 200 answer, or an error.
func answer(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = errStatus(resp.Status)
	}
	return string(b), err
}

type errStatus string

func (e errStatus) Error() string { return "status " + string(e) }

func storeReads(ctx context.Context, p *proc) (float64, error) {
	families, err := scrape(ctx, p.metrics+"/metrics")
	if err != nil {
		return 0, err
	}
	return sumMetric(families, "bigseg_store_request_duration_seconds", "operation", "memberships"), nil
}
