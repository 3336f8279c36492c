package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/segments"
)

// switchStore is a store whose metadata a test sets.
type switchStore struct {
	mu      sync.Mutex
	synced  time.Time
	metaErr error
}

func (s *switchStore) set(synced time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced, s.metaErr = synced, err
}

func (s *switchStore) Memberships(ctx context.Context, hashes []string) []segments.Read {
	return make([]segments.Read, len(hashes))
}

func (s *switchStore) Metadata(ctx context.Context) (segments.Metadata, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return segments.Metadata{LastSynchronized: s.synced}, s.metaErr
}

type statusJSON struct {
	Available          bool    `json:"available"`
	Stale              bool    `json:"stale"`
	LastSynchronizedOn int64   `json:"lastSynchronizedOn"`
	LastSynchronizedAt *string `json:"lastSynchronizedAt"`
	CheckedAt          *string `json:"checkedAt"`
	StaleAfterSeconds  float64 `json:"staleAfterSeconds"`
	Store              string  `json:"store"`
}

func TestStatusAndReadiness(t *testing.T) {
	ctx := context.Background()
	store := &switchStore{}
	synced := time.Date(2026, 11, 29, 15, 26, 40, 0, time.UTC)
	now := synced.Add(time.Minute)
	svc := segments.New(store, segments.WithClock(func() time.Time { return now }), segments.WithStaleAfter(2*time.Minute))
	drain := make(chan struct{})
	srv := httptest.NewServer(handlers.New(svc, handlers.WithStoreName("redis"), handlers.WithDrain(drain)))
	t.Cleanup(srv.Close)

	status := func() statusJSON {
		t.Helper()
		resp, body := get(t, srv.URL+"/status")
		if resp.StatusCode != 200 {
			t.Fatalf("/status: %d %s", resp.StatusCode, body)
		}
		return apitest.Decode[statusJSON](t, body)
	}
	ready := func(wantCode int, wantReason string) {
		t.Helper()
		resp, body := get(t, srv.URL+"/readyz")
		if resp.StatusCode != wantCode || !strings.Contains(string(body), wantReason) {
			t.Errorf("/readyz: %d %s, want %d with %q", resp.StatusCode, body, wantCode, wantReason)
		}
	}

	// Not yet polled.
	if st := status(); st.CheckedAt != nil || st.Available {
		t.Errorf("before the first poll: %+v", st)
	}
	ready(503, "not been polled yet")

	// Available and fresh.
	store.set(synced, nil)
	svc.Poll(ctx)
	st := status()
	at := "2026-11-29T15:26:40Z"
	checked := "2026-11-29T15:27:40Z"
	want := statusJSON{Available: true, LastSynchronizedOn: synced.UnixMilli(), LastSynchronizedAt: &at, CheckedAt: &checked, StaleAfterSeconds: 120, Store: "redis"}
	if st.Available != want.Available || st.Stale || st.LastSynchronizedOn != want.LastSynchronizedOn ||
		*st.LastSynchronizedAt != at || *st.CheckedAt != checked || st.StaleAfterSeconds != 120 || st.Store != "redis" {
		t.Errorf("available: %+v", st)
	}
	ready(200, `"ready":true`)

	// Stale: still ready by default.
	now = synced.Add(2 * time.Minute)
	svc.Poll(ctx)
	if st := status(); !st.Stale || !st.Available {
		t.Errorf("stale: %+v", st)
	}
	ready(200, `"ready":true`)

	// Unavailable.
	store.set(time.Time{}, errors.New("down"))
	svc.Poll(ctx)
	if st := status(); st.Available || st.LastSynchronizedOn != synced.UnixMilli() {
		t.Errorf("unavailable: %+v", st)
	}
	ready(503, "unavailable")

	// Never synchronized.
	store.set(time.Time{}, nil)
	svc.Poll(ctx)
	if st := status(); !st.Available || !st.Stale || st.LastSynchronizedOn != 0 || st.LastSynchronizedAt != nil {
		t.Errorf("never synchronized: %+v", st)
	}

	// Shutting down.
	close(drain)
	ready(503, "shutting down")
	for _, path := range []string{"/livez", "/healthz"} {
		if resp, body := get(t, srv.URL+path); resp.StatusCode != 200 || string(body) != "{\"status\":\"ok\"}\n" {
			t.Errorf("%s while shutting down: %d %s", path, resp.StatusCode, body)
		}
	}
}

func TestReadyRequiresFresh(t *testing.T) {
	store := &switchStore{}
	svc := segments.New(store, segments.WithStaleAfter(time.Minute))
	srv := httptest.NewServer(handlers.New(svc, handlers.WithStoreName("memory"), handlers.WithReadyRequiresFresh(true)))
	t.Cleanup(srv.Close)
	store.set(time.Now().Add(-time.Hour), nil)
	svc.Poll(context.Background())
	if resp, body := get(t, srv.URL+"/readyz"); resp.StatusCode != 503 || !strings.Contains(string(body), "stale") {
		t.Errorf("stale with READY_REQUIRES_FRESH: %d %s", resp.StatusCode, body)
	}
	store.set(time.Now(), nil)
	svc.Poll(context.Background())
	if resp, body := get(t, srv.URL+"/readyz"); resp.StatusCode != 200 {
		t.Errorf("fresh: %d %s", resp.StatusCode, body)
	}
}

// events reads Server-Sent Events from a stream, sending each event's data and each comment.
type events struct {
	resp   *http.Response
	data   chan string
	closed chan struct{}
}

func openStream(t *testing.T, url string) *events {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("X-Accel-Buffering") != "no" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
	}
	e := &events{resp: resp, data: make(chan string, 100), closed: make(chan struct{})}
	go func() {
		defer close(e.closed)
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ":"):
				e.data <- line
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				if event != "status" {
					e.data <- "unexpected event " + event
				}
				e.data <- strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return e
}

// next returns the next status event, skipping heartbeats, or fails after 10s.
func (e *events) next(t *testing.T) statusJSON {
	t.Helper()
	for {
		select {
		case d := <-e.data:
			if strings.HasPrefix(d, ":") {
				continue
			}
			apitest.CheckSchema(t, "Status", []byte(d))
			var st statusJSON
			if err := json.Unmarshal([]byte(d), &st); err != nil {
				t.Fatalf("event data %q: %v", d, err)
			}
			return st
		case <-time.After(10 * time.Second):
			t.Fatal("no status event in 10s")
		}
	}
}

func TestStatusStream(t *testing.T) {
	ctx := context.Background()
	store := &switchStore{}
	store.set(time.Now(), nil)
	svc := segments.New(store, segments.WithStaleAfter(time.Minute))
	stop := make(chan struct{})
	srv := httptest.NewServer(handlers.New(svc, handlers.WithStoreName("memory"), handlers.WithStop(stop), handlers.WithHeartbeat(time.Millisecond)))
	t.Cleanup(srv.Close)
	svc.Poll(ctx)

	e := openStream(t, srv.URL+"/status/stream")
	if st := e.next(t); !st.Available || st.Stale || st.CheckedAt == nil {
		t.Fatalf("first event: %+v", st)
	}
	// Heartbeats arrive while nothing changes.
	for got := ""; got != ": heartbeat"; {
		select {
		case got = <-e.data:
		case <-time.After(10 * time.Second):
			t.Fatal("no heartbeat in 10s")
		}
	}
	svc.Poll(ctx) // no change: no event
	store.set(time.Time{}, errors.New("down"))
	svc.Poll(ctx)
	if st := e.next(t); st.Available {
		t.Fatalf("after the store went down: %+v", st)
	}
	close(stop)
	select {
	case <-e.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("stream still open 10s after stop")
	}
}

func TestStatusStreamManySubscribers(t *testing.T) {
	ctx := context.Background()
	store := &switchStore{}
	svc := segments.New(store, segments.WithStaleAfter(time.Minute))
	srv := httptest.NewServer(handlers.New(svc, handlers.WithStoreName("memory")))
	t.Cleanup(srv.Close)
	store.set(time.Now(), nil)
	svc.Poll(ctx)

	const n = 50
	streams := make([]*events, n)
	for i := range streams {
		streams[i] = openStream(t, srv.URL+"/status/stream")
		streams[i].next(t)
	}
	// A subscriber that reads nothing must not hold up the others or the poller.
	stuck := openStream(t, srv.URL+"/status/stream")
	_ = stuck
	for i := range 20 {
		if i%2 == 0 {
			store.set(time.Time{}, errors.New("down"))
		} else {
			store.set(time.Now(), nil)
		}
		svc.Poll(ctx)
		for _, e := range streams {
			if st := e.next(t); st.Available != (i%2 == 1) {
				t.Fatalf("change %d: %+v", i, st)
			}
		}
	}
}

func TestStreamIsInSpec(t *testing.T) {
	// The stream's headers and status are checked against the spec too.
	svc := segments.New(&switchStore{})
	srv := httptest.NewServer(handlers.New(svc, handlers.WithStoreName("memory")))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/status/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	br := bufio.NewReader(resp.Body)
	var first strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		first.WriteString(line)
		if line == "\n" {
			break
		}
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(first.String()))
	apitest.Check(t, req, resp)
	if !strings.HasPrefix(first.String(), "event: status\ndata: {") {
		t.Errorf("first event: %q", first.String())
	}
}

// TestStatusStreamOutlivesWriteTimeout: the server's write timeout is for ordinary responses;
// a status stream keeps delivering past it.
func TestStatusStreamOutlivesWriteTimeout(t *testing.T) {
	const writeTimeout = 100 * time.Millisecond
	store := &switchStore{}
	store.set(time.Now(), nil)
	svc := segments.New(store)
	svc.Poll(context.Background())
	srv := httptest.NewUnstartedServer(handlers.New(svc, handlers.WithStoreName("memory"), handlers.WithHeartbeat(10*time.Millisecond)))
	srv.Config.WriteTimeout = writeTimeout
	srv.Start()
	t.Cleanup(srv.Close)

	e := openStream(t, srv.URL+"/status/stream")
	e.next(t)
	opened := time.Now()
	for time.Since(opened) < 5*writeTimeout { // keep reading well past the write timeout
		select {
		case <-e.data:
		case <-e.closed:
			t.Fatalf("stream closed %s after it opened, with a write timeout of %s", time.Since(opened).Round(time.Millisecond), writeTimeout)
		case <-time.After(5 * time.Second):
			t.Fatal("no heartbeat in 5s")
		}
	}
}
