package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/redistest"
)

// TestHostileTLSClients attacks the real program over TLS with clients that ask for HTTP/2
// (where one connection would carry hundreds of requests at once): requests whose bodies
// never come, and batches whose large answers are never read. bigseg speaks HTTP/1.1 only, so
// each is a connection of its own, under BIGSEG_MAX_CONNS: a well-behaved client keeps being
// answered, and goroutines and memory stay within the bounds of the README's Security section.
func TestHostileTLSClients(t *testing.T) { // not parallel: it judges how a good client fares under attack
	if testing.Short() {
		t.Skip("a load test: not in -short runs")
	}
	files := redistest.NewTLS(t)
	d := newTLSDir(t, files)
	p := startProcess(t, map[string]string{
		"BIGSEG_SEED_FILE": hostileSeed(t), "BIGSEG_TLS_CERT_FILE": d.cert, "BIGSEG_TLS_KEY_FILE": d.key,
		"BIGSEG_MAX_CONNS": strconv.Itoa(hostileMaxConns), "BIGSEG_MAX_KEY_BYTES": "300",
		"BIGSEG_BODY_READ_TIMEOUT": "1s", "BIGSEG_MAX_BATCH": "200",
	})
	base := "https" + strings.TrimPrefix(p.URL, "http")
	good := &goodClient{base: base, client: h2Client(t, files)}
	good.lookup()
	if resp, err := good.client.Get(base + "/livez"); err != nil || resp.ProtoMajor != 1 {
		t.Fatalf("a client asking for HTTP/2: %v %v, want HTTP/1.1", resp, err)
	} else {
		resp.Body.Close()
	}
	before := p.holdings(t)
	goroutinesBefore := metricValue(t, good, base, "go_goroutines")

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var attackers sync.WaitGroup
	for range 5 {
		attackers.Go(func() { stalledStreams(ctx, h2Client(t, files), base, 30) })
	}
	for range 3 {
		attackers.Go(func() { unreadH2Answers(ctx, h2Client(t, files), base, 20) })
	}
	peak, peakGoroutines := watchPeaks(ctx, t, p, good, base)
	attackers.Wait()
	t.Logf("before: %v, %v goroutines; peak under attack: %v, %v goroutines; the good client: %d lookups, slowest request %v",
		before, goroutinesBefore, peak, peakGoroutines, good.ok.Load(), time.Duration(good.slowest.Load()))
	if good.failed.Load() > 0 {
		t.Errorf("the well-behaved client: %d of %d lookups failed, e.g. %v", good.failed.Load(), good.ok.Load()+good.failed.Load(), good.failure.Load())
	}
	// The README's bounds: per connection two goroutines, 44 KiB, 40 KiB more for TLS, and up
	// to 4 x the header limit (16 KiB); bodies twice their budget; a margin.
	if maxGoroutines := goroutinesBefore + 2*hostileMaxConns + 50; peakGoroutines > maxGoroutines {
		t.Errorf("%v goroutines at the peak, over the bound of %v", peakGoroutines, maxGoroutines)
	}
	maxRSS := before.rssBytes + hostileMaxConns*(44<<10+40<<10+4*16<<10) + 2*(1<<20) + 64<<20
	if !raceEnabled && peak.rssBytes > maxRSS {
		t.Errorf("RSS %d MiB at the peak, over the bound of %d MiB", peak.rssBytes>>20, maxRSS>>20)
	}
}

// h2Client asks for HTTP/2, with small receive windows, so that over HTTP/2 an answer it does
// not read would soon stop the server's writes.
func h2Client(t *testing.T, files *redistest.TLSFiles) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(files.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true,
		HTTP2: &http.HTTP2Config{MaxReceiveBufferPerConnection: 64 << 10, MaxReceiveBufferPerStream: 64 << 10}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

// stalledStreams keeps n requests open whose bodies never come.
func stalledStreams(ctx context.Context, c *http.Client, base string, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				body, never := io.Pipe()
				// Give up on the body after a while, or net/http's client waits for it forever
				// once the server has answered.
				giveUp := time.AfterFunc(3*time.Second, func() { never.Close() })
				stop := context.AfterFunc(ctx, func() { never.Close() })
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/memberships", body)
				req.Header.Set("Content-Type", "application/json")
				req.ContentLength = 4000
				if resp, err := c.Do(req); err == nil {
					resp.Body.Close()
				}
				giveUp.Stop()
				stop()
				never.Close()
			}
		})
	}
	wg.Wait()
}

// unreadH2Answers keeps n batches open whose large answers it never reads.
func unreadH2Answers(ctx context.Context, c *http.Client, base string, n int) {
	body, _ := json.Marshal(map[string][]string{"contextKeys": {"huge", "huge", "huge"}})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/memberships", strings.NewReader(string(body)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				select { // hold it unread, until the server gives up on it or the attack ends
				case <-ctx.Done():
				case <-time.After(3 * time.Second):
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}
