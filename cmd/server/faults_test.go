package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
)

// faultEnv is the configuration of the fault tests: short timeouts (in the URL, unless it
// has parameters of its own) and polls, so that faults show quickly.
func faultEnv(url string, extra ...string) map[string]string {
	if !strings.Contains(url, "?") {
		url += "?dial_timeout=200ms&read_timeout=200ms&write_timeout=200ms"
	}
	env := map[string]string{"BIGSEG_REDIS_URL": url, "BIGSEG_STATUS_POLL_INTERVAL": "100ms"}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

func seedUsers(t *testing.T, c *goredis.Client, n int) {
	t.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := range n {
		pipe.SAdd(ctx, "launchdarkly:big_segment_include:"+segments.Hash("user-"+strconv.Itoa(i)), "seg-"+strconv.Itoa(i%7)+".g1")
	}
	pipe.Set(ctx, "launchdarkly:big_segments_synchronized_on", strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// answer is what a client got: a status and whether the body was a JSON object with the
// fields a lookup answer needs.
type answer struct {
	code int
	err  error
	ok   bool // the body was a well-formed answer for the code
}

func ask(client *http.Client, url string) answer {
	resp, err := client.Get(url)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	var body map[string]any
	decodeErr := json.NewDecoder(resp.Body).Decode(&body)
	a := answer{code: resp.StatusCode}
	switch resp.StatusCode {
	case 200:
		_, a.ok = body["memberships"]
	case 503:
		a.ok = body["status"] == "STORE_ERROR" && body["error"] != nil
	default:
		a.ok = decodeErr == nil && body["error"] != nil
	}
	return a
}

func TestStartsBeforeRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Reserve(t)
	srv := start(t, faultEnv(rs.URL()))
	if a := ask(http.DefaultClient, srv.URL+"/memberships/user-1"); a.code != 503 || !a.ok {
		t.Fatalf("lookup with no Redis yet: %+v", a)
	}
	if resp, body := srv.get(t, "/readyz"); resp.StatusCode != 503 {
		t.Fatalf("/readyz with no Redis yet: %d %s", resp.StatusCode, body)
	}
	rs.Restart()
	seedUsers(t, rs.Client(), 10)
	failedBefore := srv.value(t, "bigseg_store_status_polls_total", "result", "error")
	waitFor(t, "ready once Redis runs", func() bool {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	// Recovery within two poll intervals: at most one poll (in flight while Redis started)
	// failed after Redis answered.
	if failed := srv.value(t, "bigseg_store_status_polls_total", "result", "error") - failedBefore; failed > 1 {
		t.Errorf("%v polls failed after Redis started, want at most 1", failed)
	}
	if a := ask(http.DefaultClient, srv.URL+"/memberships/user-1"); a.code != 200 || !a.ok {
		t.Errorf("lookup once Redis runs: %+v", a)
	}
}

func TestRedisKilledDuringLoad(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	seedUsers(t, rs.Client(), 200)
	srv := start(t, faultEnv(rs.URL(), "BIGSEG_CACHE_SIZE", "0", "BIGSEG_LOG_LEVEL", "info"))
	client := &http.Client{Timeout: 5 * time.Second} // far above the Redis timeouts: an answer must come
	ask(client, srv.URL+"/memberships/user-1")
	baseline := srv.value(t, "go_goroutines")

	stop := make(chan struct{})
	var counts sync.Map // code -> *atomic.Int64
	var bad atomic.Int64
	var badExample atomic.Value
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := ask(client, srv.URL+"/memberships/user-"+strconv.Itoa((w*31+i)%200))
				if a.err != nil || !a.ok || (a.code != 200 && a.code != 503) {
					bad.Add(1)
					badExample.Store(fmt.Sprintf("%+v", a))
				}
				v, _ := counts.LoadOrStore(a.code, &atomic.Int64{})
				v.(*atomic.Int64).Add(1)
			}
		})
	}
	count := func(code int) int64 {
		v, ok := counts.Load(code)
		if !ok {
			return 0
		}
		return v.(*atomic.Int64).Load()
	}
	waitFor(t, "lookups before the kill", func() bool { return count(200) > 100 })
	rs.Stop() // SIGKILL
	waitFor(t, "503s while Redis is dead", func() bool { return count(503) > 50 })
	rs.Restart()
	seedUsers(t, rs.Client(), 200)
	ok := count(200)
	waitFor(t, "lookups succeeding again", func() bool { return count(200) > ok+100 })
	close(stop)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d requests were not answered with a JSON 200 or 503, e.g. %v", n, badExample.Load())
	}
	// The outage is logged as a status change, and failed reads at most once per 10 s with a
	// count, not once per failed lookup.
	if lines := srv.logs.find("membership read failed"); len(lines) > 2 {
		t.Errorf("%d log lines about failed reads for %d failed lookups, want at most 2", len(lines), count(503))
	}
	client.CloseIdleConnections() // the clients' keep-alive connections are not the server's growth
	waitFor(t, "goroutines back to their baseline", func() bool { return srv.value(t, "go_goroutines") <= baseline+5 })
	t.Logf("200: %d, 503: %d; goroutines %v at the start", count(200), count(503), baseline)
}

func TestSlowRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := rs.Client()
	seedUsers(t, c, 10)
	// A read timeout long enough that all 200 requests arrive while the first read waits, and
	// short enough that a second read, if any, still fails inside the 5 s pause.
	srv := start(t, faultEnv(rs.URL()+"?dial_timeout=200ms&write_timeout=200ms&read_timeout=1s&max_retries=-1"))
	ask(http.DefaultClient, srv.URL+"/memberships/user-1")
	baseline := srv.value(t, "go_goroutines")
	readsBefore := srv.value(t, "bigseg_store_request_duration_seconds", "operation", "memberships")

	if err := c.Do(context.Background(), "CLIENT", "PAUSE", "5000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	const n = 200
	answers := make([]answer, n)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		wg.Go(func() { answers[i] = ask(client, srv.URL+"/memberships/user-5") })
	}
	wg.Wait()
	for i, a := range answers {
		if a.err != nil || a.code != 503 || !a.ok {
			t.Fatalf("request %d while Redis is paused: %+v, want a JSON 503 after the read timeout", i, a)
		}
	}
	// All 200 waited on the same read instead of piling up on Redis.
	if reads := srv.value(t, "bigseg_store_request_duration_seconds", "operation", "memberships") - readsBefore; reads > 2 {
		t.Errorf("%v store reads for %d concurrent requests of one context, want 1 (2 at most, if some arrived after it failed)", reads, n)
	}
	client.CloseIdleConnections()
	waitFor(t, "goroutines back to their baseline", func() bool { return srv.value(t, "go_goroutines") <= baseline+5 })
	c.Do(context.Background(), "CLIENT", "UNPAUSE")
	waitFor(t, "lookups succeeding after the pause", func() bool { return ask(client, srv.URL+"/memberships/user-5").code == 200 })
}

func TestWrongDataInRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := rs.Client()
	ctx := context.Background()
	seedUsers(t, c, 10)
	c.Set(ctx, "launchdarkly:big_segment_include:"+segments.Hash("broken"), "not a set", 0)
	srv := start(t, faultEnv(rs.URL()))

	if a := ask(http.DefaultClient, srv.URL+"/memberships/broken"); a.code != 503 || !a.ok {
		t.Errorf("WRONGTYPE context: %+v, want a JSON 503", a)
	}
	if a := ask(http.DefaultClient, srv.URL+"/memberships/user-1"); a.code != 200 {
		t.Errorf("other context: %+v, want 200", a)
	}
	body, _ := json.Marshal(map[string][]string{"contextKeys": {"user-1", "broken", "user-2"}})
	resp, b := srv.post(t, "/memberships", string(body))
	results := apitest.Decode[struct{ Results []lookup }](t, b).Results
	if resp.StatusCode != 200 || len(results) != 3 || results[0].Status != "HEALTHY" || results[1].Status != "STORE_ERROR" || results[2].Status != "HEALTHY" {
		t.Errorf("batch with one WRONGTYPE context: %d %s", resp.StatusCode, b)
	}

	// A synchronized_on that is not a number: unavailable, one log line, however many polls.
	c.Set(ctx, "launchdarkly:big_segments_synchronized_on", "yesterday", 0)
	waitFor(t, "unavailable", func() bool { return srv.value(t, "bigseg_store_available") == 0 })
	polls := srv.value(t, "bigseg_store_status_polls_total", "result", "error")
	waitFor(t, "5 more failed polls", func() bool {
		return srv.value(t, "bigseg_store_status_polls_total", "result", "error") >= polls+5
	})
	lines := srv.logs.find("big segment store unavailable")
	if len(lines) != 1 || !strings.Contains(fmt.Sprint(lines[0]["err"]), "not unix milliseconds") {
		t.Errorf("log lines for a bad synchronized_on over 5+ polls: %v, want one naming the fault", lines)
	}
	c.Set(ctx, "launchdarkly:big_segments_synchronized_on", strconv.FormatInt(time.Now().UnixMilli(), 10), 0)
	waitFor(t, "available again", func() bool { return srv.value(t, "bigseg_store_available") == 1 })
}

func TestSlowClientsAndBigHeaders(t *testing.T) {
	t.Parallel()
	srv := start(t, map[string]string{"BIGSEG_BODY_READ_TIMEOUT": "500ms"}) // headers: 1s, which a busy machine still meets
	addr := strings.TrimPrefix(srv.URL, "http://")

	// A client that never finishes its headers is cut off.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /memberships/alice HTTP/1.1\r\nHost: x\r\nX-Slow: ")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Errorf("slow client: %v; want the server to close the connection", err)
	}

	// Oversized headers are refused.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/memberships/alice", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 24<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 24 KiB header with the 16 KiB limit: %d", resp.StatusCode)
	}
	// Go's server reads 4096 bytes past the limit before it refuses (docs/configuration.md).
	req.Header.Set("X-Big", strings.Repeat("a", 18000))
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("an 18,000-byte header with the 16 KiB limit, within Go's 4 KiB of slack: %d", resp.StatusCode)
	}
	// Malformed request lines are refused by Go's server, in plain text.
	for _, line := range []string{"GET /memberships/%zz HTTP/1.1", "GET /memberships/a b HTTP/1.1", "GET /livez HTTP/9.9"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, line+"\r\nHost: x\r\n\r\n")
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, _ := io.ReadAll(conn)
		conn.Close()
		if !strings.HasPrefix(string(got), "HTTP/1.1 400 ") && !strings.HasPrefix(string(got), "HTTP/1.1 505 ") ||
			!strings.Contains(string(got), "Connection: close") {
			t.Errorf("%q: %q, want a 400 (505 for the version) and the connection closed", line, got)
		}
	}
	// The server still serves.
	if a := ask(http.DefaultClient, srv.URL+"/memberships/alice"); a.code != 200 {
		t.Errorf("after the bad clients: %+v", a)
	}
	// What Go's server refuses before any handler runs is not in the request metrics (the
	// README says so): the 431 and the 400s and 505 above.
	for _, m := range srv.scrape(t)["bigseg_http_requests_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "code" && (l.GetValue() == "400" || l.GetValue() == "431" || l.GetValue() == "505") {
				t.Errorf("bigseg_http_requests_total has a series for code %s", l.GetValue())
			}
		}
	}
}

func TestTokensAndMetricsListener(t *testing.T) {
	t.Parallel()
	tokens := t.TempDir() + "/tokens"
	writeFile(t, tokens, "# bigseg callers\nsecret-token-a\n\n  secret-token-b  \n")
	metricsAddr := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	srv := start(t, map[string]string{"BIGSEG_API_TOKENS_FILE": tokens, "BIGSEG_METRICS_ADDR": metricsAddr,
		"BIGSEG_LOG_LEVEL": "debug", "BIGSEG_SEED_FILE": "../../examples/memberships.json"}) // every request logged
	if resp, _ := srv.get(t, "/memberships/alice"); resp.StatusCode != 401 {
		t.Errorf("lookup without a token: %d", resp.StatusCode)
	}
	for _, tok := range []string{"secret-token-a", "secret-token-b"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/memberships/alice", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("lookup with %s: %d", tok, resp.StatusCode)
		}
	}
	if resp, err := http.Get(srv.URL + "/metrics"); err != nil || resp.StatusCode != 404 {
		t.Errorf("/metrics on the API listener with BIGSEG_METRICS_ADDR: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics on BIGSEG_METRICS_ADDR: %v %v", resp, err)
	}
	resp.Body.Close()
	for url, want := range map[string]int{"http://" + metricsAddr + "/debug/pprof/goroutine?debug=1": 200, srv.URL + "/debug/pprof/goroutine?debug=1": 404} {
		if resp, err := http.Get(url); err != nil || resp.StatusCode != want {
			t.Errorf("%s: %v %v, want %d (Go's profiler on the metrics listener only)", url, resp, err, want)
		} else {
			resp.Body.Close()
		}
	}
	all := srv.logs.all()
	if strings.Contains(all, "secret-token") || strings.Contains(all, "alice") {
		t.Errorf("tokens or context keys in the logs:\n%s", all)
	}
	if len(srv.logs.find("request")) == 0 {
		t.Error("no access log lines")
	}
}

// While nothing listens on Redis's port, lookups and batches answer STORE_ERROR (a JSON 503 for
// a single lookup); once a poll and a read have failed, without a read each. Once Redis is up,
// the poller, polling every second while the store is unavailable, sees it within a second,
// however long its interval, and lookups read it again.
func TestDeadRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Reserve(t) // a free port; nothing listens on it yet
	srv := start(t, faultEnv(rs.URL(), "BIGSEG_STATUS_POLL_INTERVAL", "1h"))
	waitFor(t, "a failed poll", func() bool { return srv.value(t, "bigseg_store_status_polls_total", "result", "error") >= 1 })
	if a := ask(http.DefaultClient, srv.URL+"/memberships/first"); a.code != 503 || !a.ok {
		t.Fatalf("first lookup with Redis down: %+v, want a JSON 503", a)
	}
	readsBefore := srv.value(t, "bigseg_store_request_duration_seconds", "operation", "memberships")
	for i := range 50 {
		if a := ask(http.DefaultClient, srv.URL+"/memberships/user-"+strconv.Itoa(i)); a.code != 503 || !a.ok {
			t.Fatalf("lookup %d with Redis down: %+v, want a JSON 503", i, a)
		}
	}
	body, _ := json.Marshal(map[string][]string{"contextKeys": {"user-1", "user-2"}})
	if resp, b := srv.post(t, "/memberships", string(body)); resp.StatusCode != 200 || strings.Count(string(b), "STORE_ERROR") != 2 {
		t.Errorf("batch with Redis down: %d %s", resp.StatusCode, b)
	}
	if reads := srv.value(t, "bigseg_store_request_duration_seconds", "operation", "memberships") - readsBefore; reads != 0 {
		t.Errorf("%v store reads once a poll and a read had failed, want 0", reads)
	}
	rs.Restart()
	seedUsers(t, rs.Client(), 10)
	// The poll interval is an hour: only the recovery polls (every second while unavailable)
	// can find Redis back.
	waitFor(t, "ready once Redis is up", func() bool { resp, _ := srv.get(t, "/readyz"); return resp.StatusCode == 200 })
	if a := ask(http.DefaultClient, srv.URL+"/memberships/user-1"); a.code != 200 {
		t.Errorf("lookup once Redis is up: %+v", a)
	}
}

// A lookup answers within BIGSEG_LOOKUP_TIMEOUT however long Redis takes: while Redis is
// paused for longer than that, no lookup succeeds late.
func TestPausedRedisAnswersWithinTheLookupTimeout(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := rs.Client()
	seedUsers(t, c, 100)
	// Redis's own timeouts and retries would let a lookup outlast the pause; the poll interval
	// is long so that the lookups, not the poller, find the pause first.
	srv := start(t, map[string]string{"BIGSEG_REDIS_URL": rs.URL() + "?read_timeout=2s&max_retries=2", "BIGSEG_CACHE_SIZE": "0",
		"BIGSEG_STATUS_POLL_INTERVAL": "1h", "BIGSEG_LOOKUP_TIMEOUT": "300ms"})
	if a := ask(http.DefaultClient, srv.URL+"/memberships/user-1"); a.code != 200 {
		t.Fatalf("before the pause: %+v", a)
	}
	if err := c.Do(context.Background(), "CLIENT", "PAUSE", "3000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	answers := make([]answer, 20)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = ask(http.DefaultClient, srv.URL+"/memberships/user-"+strconv.Itoa(10+i)) })
	}
	wg.Wait()
	for i, a := range answers {
		if a.code != 503 || !a.ok {
			t.Errorf("lookup %d asked during a 3 s pause, with a 300 ms lookup timeout: %+v, want a JSON 503", i, a)
		}
	}
	c.Do(context.Background(), "CLIENT", "UNPAUSE")
	waitFor(t, "lookups after the pause", func() bool { return ask(http.DefaultClient, srv.URL+"/memberships/user-1").code == 200 })

	// A batch too: a pause shorter than Redis's read timeout must not end in a late success.
	if err := c.Do(context.Background(), "CLIENT", "PAUSE", "1000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	resp, body := srv.post(t, "/memberships", `{"contextKeys":["user-50","user-51","user-52"]}`)
	var batch struct{ Results []struct{ Status string } }
	if err := json.Unmarshal(body, &batch); resp.StatusCode != 200 || err != nil || len(batch.Results) != 3 {
		t.Fatalf("batch during a 1 s pause: %d %s", resp.StatusCode, body)
	}
	for i, r := range batch.Results {
		if r.Status != "STORE_ERROR" {
			t.Errorf("batch result %d asked during a 1 s pause, with a 300 ms lookup timeout: %s, want STORE_ERROR (no late success)", i, r.Status)
		}
	}
}

// A slow sender must hold up no one while it sends: with half the connections' clients
// trickling their bodies a byte at a time, other clients' lookups and batches are answered,
// and the slow ones get a 408 once their body read times out.
func TestSlowBodiesHoldUpNoOne(t *testing.T) {
	t.Parallel()
	srv := start(t, map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json", "BIGSEG_MAX_CONNS": "40",
		"BIGSEG_LOOKUP_TIMEOUT": "40ms", "BIGSEG_BODY_READ_TIMEOUT": "2s"})
	addr := strings.TrimPrefix(srv.URL, "http://")
	const slow = 20
	codes := make(chan string, slow)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range slow {
		wg.Go(func() { codes <- trickleBody(addr, stop) })
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
	waitFor(t, "slow senders connected", func() bool { return srv.value(t, "bigseg_http_open_connections") >= slow })
	for i := range 30 {
		if a := ask(http.DefaultClient, srv.URL+"/memberships/alice"); a.code != 200 {
			t.Fatalf("lookup %d while %d clients trickle bodies: %+v", i, slow, a)
		}
		if resp, b := srv.post(t, "/memberships", `{"contextKeys":["alice","bob"]}`); resp.StatusCode != 200 {
			t.Fatalf("batch %d while %d clients trickle bodies: %d %s", i, slow, resp.StatusCode, b)
		}
	}
	for range slow {
		if got := <-codes; !strings.HasPrefix(got, "HTTP/1.1 408") {
			t.Errorf("a slow sender got %q, want 408 once its body read timed out", got)
		}
	}
}

// trickleBody sends a batch's headers, then its 1000-byte body a byte every 50ms, and returns
// the status line it gets back.
func trickleBody(addr string, stop <-chan struct{}) string {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /memberships HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	answer := make(chan string, 1)
	go func() {
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			line = err.Error()
		}
		answer <- strings.TrimSpace(line)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case a := <-answer:
			return a
		case <-stop:
			return "stopped"
		case <-tick.C:
			conn.Write([]byte(" "))
		}
	}
}
