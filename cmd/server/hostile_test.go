package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto_ "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The settings of the hostile-client test: small, so that the bounds they imply are tight.
const (
	hostileMaxConns     = 300
	hostileMaxStreams   = hostileMaxConns / 2 // the server's, derived
	hostileMaxBodyBytes = 200*(300+24) + 1024 // the server's, of MAX_BATCH 200 keys of MAX_KEY_BYTES 300: about 64 KiB
	hostileBodyMemory   = 64 << 20            // the server's, derived: 64 MiB, more than 64 of its largest bodies
	hostileHeaderBytes  = 16 << 10            // the server's bound
	hostileBigRefs      = 5000                // refs of the context the amplifying batches ask for
)

// TestHostileClients runs the real program as a process and attacks it, all at once and for a
// few seconds, the ways a hostile client can: made-up methods, bodies sent a byte at a time,
// far more status streams than allowed, batches that ask for one huge context 200
// times, and a flood of connections that send nothing. Meanwhile a well-behaved client keeps
// looking up. Its lookups must all succeed, and what the process holds (memory, goroutines,
// file descriptors, metric series) must stay within bounds that follow from the settings.
func TestHostileClients(t *testing.T) { // not parallel: it judges how a good client fares under attack
	if testing.Short() {
		t.Skip("a load test: not in -short runs")
	}
	p := startProcess(t, map[string]string{
		"BIGSEG_SEED_FILE": hostileSeed(t), "BIGSEG_LOG_LEVEL": "info",
		"BIGSEG_MAX_CONNS":      strconv.Itoa(hostileMaxConns),           // stream slots follow
		"BIGSEG_LOOKUP_TIMEOUT": "400ms",                                 // a slot waited for 100 ms at most
		"BIGSEG_MAX_KEY_BYTES":  "300", "BIGSEG_BODY_READ_TIMEOUT": "1s", // headers: 2s
		"BIGSEG_MAX_BATCH": "200", // 20,000 refs an answer
	})
	addr := strings.TrimPrefix(p.URL, "http://")
	good := newGoodClient(p.URL)
	good.lookup() // warm up
	before := p.holdings(t)
	goroutinesBefore := metricValue(t, good, p.URL, "go_goroutines")

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var attackers sync.WaitGroup
	attack := func(n int, f func(ctx context.Context, addr string)) {
		for range n {
			attackers.Go(func() { f(ctx, addr) })
		}
	}
	attack(20, madeUpMethods)
	attack(100, slowBody)
	attack(500, holdStream)
	attack(8, amplifyingBatches)
	attack(1000, silentConnection)
	attack(50, trickledGetBody)
	attack(50, stalledBigBody)
	attack(20, unreadAnswers)
	attack(100, headerFlood)

	peak, peakGoroutines := watchPeaks(ctx, t, p, good, p.URL)
	attackers.Wait()
	good.lookup()

	if good.failed.Load() > 0 {
		t.Errorf("the well-behaved client: %d of %d lookups failed, e.g. %v", good.failed.Load(), good.ok.Load()+good.failed.Load(), good.failure.Load())
	}
	if good.retried.Load() > good.ok.Load()/10 {
		t.Errorf("the well-behaved client retried %d of %d lookups on a closed connection", good.retried.Load(), good.ok.Load())
	}
	// The bounds of the README's Security section: per connection a goroutine for it and one
	// reading ahead, an fd, 44 KiB (buffers, the first 4 KiB of a body, an answer's buffer) and
	// its header (up to 4x the limit while it is parsed); bodies (twice their budget: a body's
	// buffer is copied as it grows); and a margin for the runtime, the poller and the listeners.
	maxGoroutines := goroutinesBefore + 2*hostileMaxConns + 50
	maxFDs := before.fds + hostileMaxConns + 20
	maxRSS := before.rssBytes + hostileMaxConns*(44<<10+4*hostileHeaderBytes) + 2*hostileBodyMemory + 64<<20
	t.Logf("before: %v, %v goroutines; peak under attack: %v, %v goroutines; the good client: %d lookups, %d retried, slowest request %v",
		before, goroutinesBefore, peak, peakGoroutines, good.ok.Load(), good.retried.Load(), time.Duration(good.slowest.Load()))
	if peakGoroutines > maxGoroutines {
		t.Errorf("%v goroutines at the peak, over the bound of %v", peakGoroutines, maxGoroutines)
	}
	if peak.fds > maxFDs {
		t.Errorf("%d fds at the peak, over the bound of %d", peak.fds, maxFDs)
	}
	switch {
	case raceEnabled:
		t.Log("RSS not checked: the race detector multiplies it (CI runs this test without -race too)")
	case peak.rssBytes > maxRSS:
		t.Errorf("RSS %d MiB at the peak, over the bound of %d MiB", peak.rssBytes>>20, maxRSS>>20)
	}
	checkMetricSeries(t, good, p.URL)
	waitFor(t, "goroutines back near their baseline", func() bool {
		return metricValue(t, good, p.URL, "go_goroutines") <= goroutinesBefore+20
	})
}

// hostileSeed writes a fixture with a few ordinary contexts and one with hostileBigRefs refs.
func hostileSeed(t *testing.T) string {
	t.Helper()
	refs := make([]string, hostileBigRefs)
	for i := range refs {
		refs[i] = fmt.Sprintf("segment-number-%05d.g1", i)
	}
	f := map[string]any{"contexts": map[string]any{
		"alice": map[string][]string{"included": {"beta.g1"}},
		"bob":   map[string][]string{"excluded": {"beta.g1"}},
		"huge":  map[string][]string{"included": refs},
	}}
	b, _ := json.Marshal(f)
	path := filepath.Join(t.TempDir(), "seed.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// goodClient looks up the way a real client does, with keep-alive connections, retrying once
// a request whose connection closed under it (as net/http's client does on its own for
// idempotent requests: a server may close an idle connection just as a request is sent on it).
type goodClient struct {
	base    string
	client  *http.Client
	ok      atomic.Int64
	retried atomic.Int64
	failed  atomic.Int64
	failure atomic.Value
	slowest atomic.Int64 // nanoseconds of the slowest request, retries included
}

func newGoodClient(base string) *goodClient {
	return &goodClient{base: base, client: &http.Client{Timeout: 10 * time.Second}}
}

// do sends a request made by newReq, retrying once on a connection error.
func (g *goodClient) do(newReq func() *http.Request) (*http.Response, error) {
	start := time.Now()
	defer func() {
		for d := int64(time.Since(start)); ; {
			if old := g.slowest.Load(); d <= old || g.slowest.CompareAndSwap(old, d) {
				return
			}
		}
	}()
	resp, err := g.client.Do(newReq())
	if err != nil {
		g.retried.Add(1)
		resp, err = g.client.Do(newReq())
	}
	return resp, err
}

func (g *goodClient) lookup() {
	for _, newReq := range []func() *http.Request{
		func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, g.base+"/memberships/alice", nil)
			return r
		},
		func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, g.base+"/memberships", strings.NewReader(`{"contextKeys":["alice","bob"]}`))
			r.Header.Set("Content-Type", "application/json")
			return r
		},
	} {
		resp, err := g.do(newReq)
		if err != nil {
			g.failed.Add(1)
			g.failure.Store(err.Error())
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			g.failed.Add(1)
			g.failure.Store(resp.Status)
			continue
		}
		g.ok.Add(1)
	}
}

// metricValue scrapes one metric's first value.
func metricValue(t *testing.T, g *goodClient, base, name string) float64 {
	t.Helper()
	families := scrapeFamilies(t, g, base)
	f, ok := families[name]
	if !ok || len(f.Metric) == 0 {
		t.Fatalf("no metric %s", name)
	}
	return (&dto{f}).value()
}

func scrapeFamilies(t *testing.T, g *goodClient, base string) map[string]*dto_.MetricFamily {
	t.Helper()
	resp, err := g.do(func() *http.Request { r, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil); return r })
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return families
}

// checkMetricSeries checks that no request label holds what a client made up.
func checkMetricSeries(t *testing.T, g *goodClient, base string) {
	t.Helper()
	f := scrapeFamilies(t, g, base)["bigseg_http_requests_total"]
	standard := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true,
		"CONNECT": true, "OPTIONS": true, "TRACE": true, "other": true}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == "method" && !standard[l.GetValue()] {
				t.Errorf("a method label of %d bytes: %.40q", len(l.GetValue()), l.GetValue())
			}
			if l.GetName() == "route" && !strings.HasPrefix(l.GetValue(), "/") && l.GetValue() != "unmatched" {
				t.Errorf("a route label %q", l.GetValue())
			}
		}
	}
	if len(f.Metric) > 200 {
		t.Errorf("%d series of bigseg_http_requests_total", len(f.Metric))
	}
}

// madeUpMethods pipelines requests with a new method name each, some of them long.
func madeUpMethods(ctx context.Context, addr string) {
	for ctx.Err() == nil {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			continue
		}
		go io.Copy(io.Discard, conn)
		for i := 0; i < 100 && ctx.Err() == nil; i++ {
			method := "X" + strconv.FormatUint(rand.Uint64(), 36) + strings.Repeat("M", rand.IntN(4000))
			if _, err := fmt.Fprintf(conn, "%s /memberships/alice HTTP/1.1\r\nHost: x\r\n\r\n", method); err != nil {
				break
			}
		}
		conn.Close()
	}
}

// slowBody sends a batch's headers and then its body a byte every 100ms, over and over.
func slowBody(ctx context.Context, addr string) {
	head := fmt.Sprintf("POST /memberships HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", hostileMaxBodyBytes)
	trickle(ctx, addr, head, " ")
}

// holdStream opens a status stream and never reads it; refused, it asks again on the same
// connection.
func holdStream(ctx context.Context, addr string) {
	for ctx.Err() == nil {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			continue
		}
		br := bufio.NewReader(conn)
		for ctx.Err() == nil {
			if _, err := fmt.Fprintf(conn, "GET /status/stream HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				break
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			if resp.StatusCode == 200 {
				<-ctx.Done() // hold it, reading nothing
				break
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		conn.Close()
	}
}

// amplifyingBatches asks for the huge context 200 times in one batch of a few KB, and for it
// a few times (an answer under the limit, streamed).
func amplifyingBatches(ctx context.Context, addr string) {
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = "huge"
	}
	big, _ := json.Marshal(map[string][]string{"contextKeys": keys})
	small, _ := json.Marshal(map[string][]string{"contextKeys": keys[:3]})
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for i := 0; ctx.Err() == nil; i++ {
		body := big
		if i%4 == 0 {
			body = small
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/memberships", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// silentConnection connects and sends nothing, over and over.
func silentConnection(ctx context.Context, addr string) {
	for ctx.Err() == nil {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			continue
		}
		buf := make([]byte, 1)
		conn.SetReadDeadline(time.Now().Add(time.Second))
		conn.Read(buf) // until the server closes it, or a second
		conn.Close()
	}
}

// trickledGetBody sends a lookup with a body, a byte every 100ms: refused at once (no route but
// POST /memberships reads a body), its connection closed, it connects again.
func trickledGetBody(ctx context.Context, addr string) {
	trickle(ctx, addr, "GET /memberships/alice HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", " ")
}

// stalledBigBody sends all but the last byte of the largest batch body allowed, and stalls.
func stalledBigBody(ctx context.Context, addr string) {
	head := fmt.Sprintf("POST /memberships HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", hostileMaxBodyBytes)
	trickle(ctx, addr, head+strings.Repeat(" ", hostileMaxBodyBytes-2), "")
}

// headerFlood sends most of the largest header allowed, and stalls.
func headerFlood(ctx context.Context, addr string) {
	trickle(ctx, addr, "GET /memberships/alice HTTP/1.1\r\nHost: x\r\nX-Pad: "+strings.Repeat("p", hostileHeaderBytes-100), "")
}

// trickle connects, sends first, then every 100ms sends more (if any), until the server
// closes the connection; over and over.
func trickle(ctx context.Context, addr, first, more string) {
	for ctx.Err() == nil {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			continue
		}
		closed := make(chan struct{})
		go func() { io.Copy(io.Discard, conn); close(closed) }()
		conn.Write([]byte(first))
		tick := time.NewTicker(100 * time.Millisecond)
	send:
		for {
			select {
			case <-ctx.Done():
				break send
			case <-closed:
				break send
			case <-tick.C:
				if more != "" {
					conn.Write([]byte(more))
				}
			}
		}
		tick.Stop()
		conn.Close()
	}
}

// unreadAnswers pipelines batches with large answers and never reads them, with a small
// receive buffer: the server's writes get stuck on a full socket.
func unreadAnswers(ctx context.Context, addr string) {
	keys := make([]string, 3)
	for i := range keys {
		keys[i] = "huge"
	}
	body, _ := json.Marshal(map[string][]string{"contextKeys": keys})
	req := fmt.Sprintf("POST /memberships HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	requests := []byte(strings.Repeat(req, 50))
	for ctx.Err() == nil {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			continue
		}
		_ = conn.(*net.TCPConn).SetReadBuffer(1024)
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		for { // until the server closes the connection, or the attack ends
			if _, err := conn.Write(requests); err != nil {
				break
			}
		}
		stop()
		conn.Close()
	}
}

// TestSideListenerIsBounded floods the metrics listener with connections that send nothing
// or half a header, and holds them: it keeps at most sideConns open, and still answers a
// probe.
func TestSideListenerIsBounded(t *testing.T) { // not parallel: a new client of a full listener needs the CPU within its 100 ms grace
	if testing.Short() {
		t.Skip("a load test: not in -short runs")
	}
	p := startProcess(t, map[string]string{"BIGSEG_METRICS_ADDR": "127.0.0.1:0"})
	addr := p.logs.wait(t, "side listener")["addr"].(string)
	before := p.holdings(t)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 4 * sideConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i%2 == 0 {
			fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: %s", strings.Repeat("p", 4000))
		}
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for range 5 {
		resp, err := client.Get("http://" + addr + "/livez")
		if err != nil {
			t.Fatalf("a probe of the flooded metrics listener: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("a probe of the flooded metrics listener: %s", resp.Status)
		}
	}
	if h := p.holdings(t); h.fds > before.fds+sideConns+10 {
		t.Errorf("%d fds with %d connections to the metrics listener (%d before), over %d", h.fds, len(conns), before.fds, before.fds+sideConns+10)
	}
}

// TestUnreadAnswersDoNotLockOut fills every connection slot with clients that pipeline
// requests and never read an answer, so that each connection's write is stuck on a full
// socket: a new client is still answered, since at the limit the connection stuck longest
// (past stuckGrace) is closed to make room. Without that, the write timeout (an hour here)
// would be the new client's wait.
func TestUnreadAnswersDoNotLockOut(t *testing.T) { // not parallel: a new client of a full listener needs the CPU within its 100 ms grace
	if testing.Short() {
		t.Skip("a load test: not in -short runs")
	}
	const slots = 20
	p := startProcess(t, map[string]string{"BIGSEG_MAX_CONNS": strconv.Itoa(slots), "BIGSEG_WRITE_TIMEOUT": "1h"})
	addr := strings.TrimPrefix(p.URL, "http://")
	before := p.holdings(t)
	requests := []byte(strings.Repeat("GET /openapi.yaml HTTP/1.1\r\nHost: x\r\n\r\n", 3000)) // ~50 MB of answers
	dials := 0
	dial := func() {
		dials++
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.(*net.TCPConn).SetReadBuffer(1024)
		go c.Write(requests) // blocks once the server, stuck writing, stops reading
	}
	for range slots {
		dial()
	}
	// The listener, full, closes a connection whose request it has not read within its grace
	// of 100 ms, which a busy machine may take: one more client then takes the slot.
	lastDial := time.Now()
	waitFor(t, "every slot taken by a client that reads nothing", func() bool {
		if p.holdings(t).sockets >= before.sockets+slots {
			return true
		}
		if dials < 2*slots && time.Since(lastDial) > time.Second {
			dial()
			lastDial = time.Now()
		}
		return false
	})
	newClientsAnswered(t, p, 30*time.Second, "every slot held by unread answers")
}

// newClientsAnswered checks that three new clients in a row are answered by p within
// timeout each, while what holds its connections is described by while.
func newClientsAnswered(t *testing.T, p *process, timeout time.Duration, while string) {
	t.Helper()
	client := &http.Client{Timeout: timeout}
	for i := range 3 {
		resp, err := client.Get(p.URL + "/livez")
		if err != nil {
			t.Fatalf("new client %d, %s: %v", i, while, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("new client %d: %s", i, resp.Status)
		}
	}
}

// watchPeaks has the good client look up, and samples p's holdings and goroutines (through
// base), until ctx ends; it returns the peaks.
func watchPeaks(ctx context.Context, t *testing.T, p *process, good *goodClient, base string) (peak holdings, peakGoroutines float64) {
	for ctx.Err() == nil {
		good.lookup()
		h := p.holdings(t)
		peak.rssBytes, peak.threads, peak.fds = max(peak.rssBytes, h.rssBytes), max(peak.threads, h.threads), max(peak.fds, h.fds)
		peakGoroutines = max(peakGoroutines, metricValue(t, good, base, "go_goroutines"))
	}
	return peak, peakGoroutines
}

// TestStreamsCannotTakeEveryConnection opens twice as many status streams as there are
// connection slots. An open stream is a connection in use, which the limit never closes to make
// room, so streams are held to half of BIGSEG_MAX_CONNS: a new client is still answered.
func TestStreamsCannotTakeEveryConnection(t *testing.T) { // not parallel: a new client of a full listener needs the CPU within its 100 ms grace
	if testing.Short() {
		t.Skip("a load test: not in -short runs")
	}
	const slots = 20
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // after the process is killed, which ends every stream
	p := startProcess(t, map[string]string{"BIGSEG_MAX_CONNS": strconv.Itoa(slots)})
	addr := strings.TrimPrefix(p.URL, "http://")
	before := p.holdings(t)
	for range 2 * slots {
		wg.Go(func() { holdStream(ctx, addr) })
	}
	waitFor(t, "half the slots held by streams", func() bool { return p.holdings(t).sockets >= before.sockets+slots/2 })
	newClientsAnswered(t, p, 10*time.Second, "with streams on every connection they may take")
}

// TestOpenConnectionsGauge checks bigseg_http_open_connections against the connections open:
// some idle ones, and the scraper's own. (A slot taken by an Accept still waiting for its
// connection is not an open connection.)
func TestOpenConnectionsGauge(t *testing.T) {
	t.Parallel()
	p := startProcess(t, nil)
	const idle = 5
	for range idle {
		c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	g := newGoodClient(p.URL)
	var open float64
	waitFor(t, "the gauge to count the idle connections and the scraper's", func() bool {
		open = metricValue(t, g, p.URL, "bigseg_http_open_connections")
		return open >= idle+1
	})
	if open != idle+1 {
		t.Errorf("bigseg_http_open_connections = %v with %d connections open", open, idle+1)
	}
}

// TestStreamsHeldToHalfTheConnections: half of BIGSEG_MAX_CONNS may hold streams, and a stream
// beyond them is refused.
func TestStreamsHeldToHalfTheConnections(t *testing.T) { // not parallel: a new client of a full listener needs the CPU within its 100 ms grace
	const slots = 20
	p := startProcess(t, map[string]string{"BIGSEG_MAX_CONNS": strconv.Itoa(slots)})
	addr := strings.TrimPrefix(p.URL, "http://")
	for i := range slots / 2 {
		if code := openStream(t, addr); code != http.StatusOK {
			t.Fatalf("stream %d of %d: %d", i+1, slots/2, code)
		}
	}
	if code := openStream(t, addr); code != http.StatusServiceUnavailable {
		t.Errorf("stream %d: %d, want 503", slots/2+1, code)
	}
}

// openStream asks for a status stream on a connection of its own, closed when the test ends,
// and returns the answer's status code.
func openStream(t *testing.T, addr string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET /status/stream HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}
