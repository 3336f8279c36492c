package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/redistest"
)

type statusEvent struct {
	Available bool    `json:"available"`
	Stale     bool    `json:"stale"`
	CheckedAt *string `json:"checkedAt"`
}

// stream reads a status stream's events.
func (s *server) stream(t *testing.T) (<-chan statusEvent, <-chan struct{}) {
	t.Helper()
	resp, err := http.Get(s.URL + "/status/stream")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch, done := make(chan statusEvent, 100), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev statusEvent
				if json.Unmarshal([]byte(data), &ev) == nil {
					ch <- ev
				}
			}
		}
	}()
	return ch, done
}

func nextEvent(t *testing.T, ch <-chan statusEvent) statusEvent {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no status event in 15s")
		return statusEvent{}
	}
}

// scrape returns the server's metrics.
func (s *server) scrape(t *testing.T) map[string]*dto {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto{}
	for name, f := range families {
		out[name] = &dto{f}
	}
	return out
}

// gauge returns the value of an unlabelled gauge, or of the series with the given labels.
func (s *server) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	f, ok := s.scrape(t)[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	return f.value(labels...)
}

// waitFor polls cond until it holds or 15s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 15s for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

func TestStatusTransitionsWithRealRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := rs.Client()
	ctx := context.Background()
	const syncedKey = "launchdarkly:big_segments_synchronized_on"
	setSynced := func(at time.Time) {
		if err := c.Set(ctx, syncedKey, strconv.FormatInt(at.UnixMilli(), 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	setSynced(time.Now())
	c.SAdd(ctx, "launchdarkly:big_segment_include:"+hashOf("alice"), "beta.g1")
	srv := start(t, map[string]string{
		"BIGSEG_REDIS_URL": rs.URL(), "BIGSEG_STATUS_POLL_INTERVAL": "20ms", "BIGSEG_STALE_AFTER": "1m",
		"BIGSEG_CACHE_SIZE": "0",
	})
	events, _ := srv.stream(t)

	ev := nextEvent(t, events)
	if ev.CheckedAt == nil { // connected before the first poll completed
		ev = nextEvent(t, events)
	}
	if !ev.Available || ev.Stale {
		t.Fatalf("first event: %+v", ev)
	}
	expectGauges := func(stage string, available, stale float64) {
		t.Helper()
		if got := srv.value(t, "bigseg_store_available"); got != available {
			t.Errorf("%s: bigseg_store_available = %v, want %v", stage, got, available)
		}
		if got := srv.value(t, "bigseg_store_stale"); got != stale {
			t.Errorf("%s: bigseg_store_stale = %v, want %v", stage, got, stale)
		}
	}
	expectReady := func(stage string, code int) {
		t.Helper()
		if resp, body := srv.get(t, "/readyz"); resp.StatusCode != code {
			t.Errorf("%s: /readyz %d %s, want %d", stage, resp.StatusCode, body, code)
		}
	}
	expectLookup := func(stage string, code int, status string) {
		t.Helper()
		resp, body := srv.get(t, "/memberships/alice")
		if got := apitest.Decode[lookup](t, body); resp.StatusCode != code || got.Status != status {
			t.Errorf("%s: lookup %d %s, want %d %s", stage, resp.StatusCode, body, code, status)
		}
	}
	expectGauges("available", 1, 0)
	expectReady("available", 200)
	if got := srv.value(t, "bigseg_ready"); got != 1 {
		t.Errorf("bigseg_ready = %v while available, want 1", got)
	}
	expectLookup("available", 200, "HEALTHY")

	rs.Shutdown()
	if ev := nextEvent(t, events); ev.Available {
		t.Fatalf("after Redis stopped: %+v", ev)
	}
	expectGauges("Redis stopped", 0, 0)
	expectReady("Redis stopped", 503)
	if got := srv.value(t, "bigseg_ready"); got != 0 {
		t.Errorf("bigseg_ready = %v while Redis is stopped, want 0", got)
	}
	expectLookup("Redis stopped", 503, "STORE_ERROR")

	rs.Restart()
	if ev := nextEvent(t, events); !ev.Available || ev.Stale {
		t.Fatalf("after Redis came back: %+v", ev)
	}
	expectGauges("Redis back", 1, 0)
	expectReady("Redis back", 200)
	expectLookup("Redis back", 200, "HEALTHY")

	old := time.Now().Add(-2 * time.Minute)
	setSynced(old)
	if ev := nextEvent(t, events); !ev.Available || !ev.Stale {
		t.Fatalf("after synchronized_on went old: %+v", ev)
	}
	expectGauges("stale", 1, 1)
	expectReady("stale", 200) // staleness alone keeps an instance ready
	expectLookup("stale", 200, "STALE")
	if got := srv.value(t, "bigseg_store_last_synchronized_timestamp_seconds"); got != float64(old.UnixMilli())/1000 {
		t.Errorf("last synchronized gauge = %v, want %v", got, float64(old.UnixMilli())/1000)
	}

	setSynced(time.Now())
	if ev := nextEvent(t, events); !ev.Available || ev.Stale {
		t.Fatalf("after synchronization: %+v", ev)
	}
	expectGauges("fresh again", 1, 0)
	expectLookup("fresh again", 200, "HEALTHY")

	// Each change came exactly once: more polls bring no more events.
	polls := srv.value(t, "bigseg_store_status_polls_total", "result", "success")
	waitFor(t, "10 more polls", func() bool {
		return srv.value(t, "bigseg_store_status_polls_total", "result", "success") >= polls+10
	})
	select {
	case ev := <-events:
		t.Errorf("event without a change: %+v", ev)
	default:
	}
	if got := srv.value(t, "bigseg_store_status_changes_total"); got != 5 {
		t.Errorf("bigseg_store_status_changes_total = %v, want 5 (first poll and four changes)", got)
	}
	if got := len(srv.logs.find("big segment store unavailable")); got != 1 {
		t.Errorf("%d 'unavailable' log lines for one outage, want 1", got)
	}
}

func TestShutdownSequence(t *testing.T) {
	t.Parallel()
	srv := start(t, map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json", "BIGSEG_SHUTDOWN_DELAY": "5s"})
	if resp, _ := srv.get(t, "/readyz"); resp.StatusCode != 200 {
		waitFor(t, "ready", func() bool { resp, _ := http.Get(srv.URL + "/readyz"); return resp != nil && resp.StatusCode == 200 })
	}
	_, streamDone := srv.stream(t)
	stopped := make(chan error, 1)
	go func() { stopped <- srv.stop() }()

	srv.logs.wait(t, "shutting down: not ready, still serving")
	if resp, body := srv.get(t, "/readyz"); resp.StatusCode != 503 || !strings.Contains(string(body), "shutting down") {
		t.Errorf("/readyz during the delay: %d %s", resp.StatusCode, body)
	}
	if resp, body := srv.get(t, "/memberships/alice"); resp.StatusCode != 200 {
		t.Errorf("lookup during the delay: %d %s", resp.StatusCode, body)
	}
	if got := srv.value(t, "bigseg_ready"); got != 0 {
		t.Errorf("bigseg_ready = %v during the delay, want 0", got)
	}
	if len(srv.logs.find("shutting down: closing the listener, finishing requests")) != 0 {
		t.Fatal("the delay ended before the checks: they proved nothing")
	}
	select {
	case <-streamDone:
	case <-time.After(15 * time.Second):
		t.Fatal("status stream still open 15s after shutdown began")
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := http.Get(srv.URL + "/livez"); err == nil {
		t.Error("listener still open after shutdown")
	}
	if len(srv.logs.find("stopped")) != 1 {
		t.Errorf("no clean stop in the logs:\n%s", srv.logs.all())
	}
}

func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	srv := start(t, map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": "bigsegtest:metrics:nothing"})
	srv.get(t, "/memberships/alice")
	srv.get(t, "/memberships/alice")
	srv.get(t, "/nope")
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.New(resp.Body).Lint()
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	m := srv.scrape(t)
	for _, name := range []string{
		"bigseg_store_available", "bigseg_store_stale", "bigseg_store_last_synchronized_timestamp_seconds",
		"bigseg_store_status_polls_total", "bigseg_store_status_changes_total", "bigseg_membership_lookups_total",
		"bigseg_store_request_duration_seconds", "bigseg_cache_entries", "bigseg_http_requests_total",
		"bigseg_http_request_duration_seconds", "bigseg_redis_pool_connections", "bigseg_ready", "go_goroutines", "process_cpu_seconds_total",
	} {
		if _, ok := m[name]; !ok {
			t.Errorf("no metric %s", name)
		}
	}
	if got := m["bigseg_membership_lookups_total"].value("status", "STALE", "source", "cache"); got != 1 { // never synchronized: STALE
		t.Errorf("cached stale lookups = %v, want 1", got)
	}
	if got := m["bigseg_http_requests_total"].value("route", "/memberships/{contextKey}", "method", "GET", "code", "200"); got != 2 {
		t.Errorf("lookup requests = %v, want 2", got)
	}
	if got := m["bigseg_http_requests_total"].value("route", "unmatched", "method", "GET", "code", "404"); got != 1 {
		t.Errorf("unmatched requests = %v, want 1", got)
	}
	// No label value may be a context key or hash.
	for name, f := range m {
		for _, series := range f.Metric {
			for _, l := range series.Label {
				if v := l.GetValue(); strings.Contains(v, "alice") || strings.Contains(v, hashOf("alice")) {
					t.Errorf("%s has label %s=%q", name, l.GetName(), v)
				}
			}
		}
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	apitest.Do(t, nil, req)
}
