package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/internal/limit"
	"github.com/bigseg/bigseg/segments"
)

// switchStore is a store whose metadata a test sets.
type switchStore struct {
	mu      sync.Mutex
	synced  time.Time
	cursor  string
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
	return segments.Metadata{LastSynchronized: s.synced, Cursor: s.cursor}, s.metaErr
}

type statusJSON struct {
	Available          bool    `json:"available"`
	Stale              bool    `json:"stale"`
	LastSynchronizedOn int64   `json:"lastSynchronizedOn"`
	LastSynchronizedAt *string `json:"lastSynchronizedAt"`
	Cursor             *string `json:"cursor"`
	DataChangedAt      *string `json:"dataChangedAt"`
	CheckedAt          *string `json:"checkedAt"`
	StaleAfterSeconds  float64 `json:"staleAfterSeconds"`
	Store              string  `json:"store"`
}

func TestStatusAndReadiness(t *testing.T) {
	ctx := context.Background()
	store := &switchStore{}
	synced := time.Date(2026, 11, 29, 15, 26, 40, 0, time.UTC)
	now := synced.Add(time.Minute)
	svc := oneService(store, segments.Config{Now: func() time.Time { return now }, StaleAfter: 2 * time.Minute})
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "redis"}, svc))
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
	svc.Drain()
	ready(503, "shutting down")
	for _, path := range []string{"/livez", "/healthz"} {
		if resp, body := get(t, srv.URL+path); resp.StatusCode != 200 || string(body) != "{\"status\":\"ok\"}\n" {
			t.Errorf("%s while shutting down: %d %s", path, resp.StatusCode, body)
		}
	}
}

func TestReadyRequiresFresh(t *testing.T) {
	store := &switchStore{}
	svc := oneService(store, segments.Config{StaleAfter: time.Minute, ReadyRequiresFresh: true})
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "embedded"}, svc))
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
	return openStreamWith(t, http.DefaultClient, url)
}

func openStreamWith(t *testing.T, client *http.Client, url string) *events {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("X-Accel-Buffering") != "no" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
	}
	// Unbuffered: a test that does not read leaves the events in the connection, where the
	// server sees them pile up.
	e := &events{resp: resp, data: make(chan string), closed: make(chan struct{})}
	stop := make(chan struct{})
	send := func(d string) bool {
		select {
		case e.data <- d:
			return true
		case <-stop:
			return false
		}
	}
	go func() {
		defer close(e.closed)
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for ok := true; ok && sc.Scan(); {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ":"):
				ok = send(line)
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				if event != "status" {
					ok = send("unexpected event " + event)
				}
				ok = ok && send(strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	t.Cleanup(func() { close(stop); resp.Body.Close(); <-e.closed })
	return e
}

// next returns the next status event, skipping heartbeats, or fails after 10s.
func (e *events) next(t *testing.T) statusJSON {
	t.Helper()
	st, ok := e.nextWithin(t, 10*time.Second)
	if !ok {
		t.Fatal("no status event in 10s")
	}
	return st
}

// nextWithin returns the next status event, skipping heartbeats, or false if none comes
// within d.
func (e *events) nextWithin(t *testing.T, d time.Duration) (statusJSON, bool) {
	t.Helper()
	timeout := time.After(d)
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
			return st, true
		case <-timeout:
			return statusJSON{}, false
		}
	}
}

func TestStatusStream(t *testing.T) {
	ctx := context.Background()
	store := &switchStore{}
	store.set(time.Now(), nil)
	svc := oneService(store, segments.Config{StaleAfter: time.Minute})
	stop := make(chan struct{})
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "embedded", Stop: stop, Heartbeat: time.Millisecond}, svc))
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
	timeout := time.After(10 * time.Second)
	for {
		select {
		case <-e.data: // heartbeats sent before the stop
		case <-e.closed:
			return
		case <-timeout:
			t.Fatal("stream still open 10s after stop")
		}
	}
}

func TestStatusStreamManySubscribers(t *testing.T) {
	ctx := context.Background()
	store := &switchStore{}
	svc := oneService(store, segments.Config{StaleAfter: time.Minute})
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "embedded"}, svc))
	t.Cleanup(srv.Close)
	store.set(time.Now(), nil)
	svc.Poll(ctx)

	const n, changes = 10, 2000
	streams := make([]*events, n)
	for i := range streams {
		streams[i] = openStream(t, srv.URL+"/status/stream")
		streams[i].next(t)
	}
	// A subscriber that reads nothing, with a tiny receive buffer, so that the server's writes
	// to it block: it must not hold up the others or the poller.
	stuck := stuckStream(t, srv.URL+"/status/stream")
	for i := range changes {
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
	// Now read the stuck stream: it fell behind (else this test tests nothing), lost changes
	// on the way, and still ends with the latest.
	got, last := 0, statusJSON{}
	for got < changes+1 {
		st, ok := stuck.nextWithin(t, time.Second)
		if !ok {
			break
		}
		got, last = got+1, st
	}
	if got >= changes+1 {
		t.Fatalf("the stuck subscriber got all %d events: its writes never blocked, so this test proves nothing", got)
	}
	if !last.Available {
		t.Errorf("the stuck subscriber's last event %+v, want the latest (available)", last)
	}
	t.Logf("the stuck subscriber got %d of %d events", got, changes+1)
}

// stuckStream opens a stream over a connection whose receive buffer is as small as the kernel
// allows, and reads nothing from it until the test asks.
func stuckStream(t *testing.T, url string) *events {
	t.Helper()
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		cerr := c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) })
		return errors.Join(cerr, err)
	}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	t.Cleanup(client.CloseIdleConnections)
	return openStreamWith(t, client, url)
}

func TestStreamIsInSpec(t *testing.T) {
	// The stream's headers and status are checked against the spec too.
	svc := oneService(&switchStore{})
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "embedded"}, svc))
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
	svc := oneService(store)
	svc.Poll(context.Background())
	srv := httptest.NewUnstartedServer(handlers.New(handlers.Config{StoreName: "embedded", Heartbeat: 10 * time.Millisecond}, svc))
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

// Status streams hold connections open: at most WithMaxStreams at once (beyond, a JSON 503
// with Retry-After, at once), and with tokens configured only for clients with one.
func TestStatusStreamLimits(t *testing.T) {
	svc := oneService(&switchStore{})
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "embedded", Streams: limit.Streams(3, handlers.Error)}, svc))
	t.Cleanup(srv.Close)
	for range 3 {
		openStream(t, srv.URL+"/status/stream").next(t)
	}
	resp, body := get(t, srv.URL+"/status/stream")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "too many status streams") {
		t.Errorf("a fourth stream: %d %v %s, want a JSON 503 with Retry-After", resp.StatusCode, resp.Header, body)
	}

	authed := httptest.NewServer(handlers.New(defended(handlers.Config{StoreName: "embedded"}, newTokens([]string{"tok"})), svc))
	t.Cleanup(authed.Close)
	if resp, body := get(t, authed.URL+"/status/stream"); resp.StatusCode != 401 {
		t.Errorf("a stream without a token: %d %s, want 401", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodGet, authed.URL+"/status/stream", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a stream with a token: %d", resp.StatusCode)
	}
	if resp, body := get(t, authed.URL+"/status"); resp.StatusCode != 200 {
		t.Errorf("/status with tokens on: %d %s, want it open", resp.StatusCode, body)
	}
}

// Before the first poll, the status says what is known: nothing; never synchronized is stale.
func TestStatusBeforeFirstPoll(t *testing.T) {
	svc := oneService(&switchStore{})
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "embedded"}, svc))
	t.Cleanup(srv.Close)
	st := openStream(t, srv.URL+"/status/stream").next(t)
	if st.Available || !st.Stale || st.CheckedAt != nil || st.LastSynchronizedOn != 0 {
		t.Errorf("first event before any poll: %+v, want unavailable, stale, never checked", st)
	}
	_, body := get(t, srv.URL+"/status")
	if got := apitest.Decode[statusJSON](t, body); got != st {
		t.Errorf("/status before any poll: %+v, want the same as the stream's %+v", got, st)
	}
}

// /status says which version of the data the instance serves, and the stream tells of every
// new one, so that a client that caches answers knows when to drop them.
func TestStatusFollowsTheCursor(t *testing.T) {
	ctx := context.Background()
	store := &switchStore{synced: time.Now(), cursor: "v1"}
	svc := oneService(store)
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "redis"}, svc))
	t.Cleanup(srv.Close)
	svc.Poll(ctx)
	_, body := get(t, srv.URL+"/status")
	st := apitest.Decode[statusJSON](t, body)
	if st.Cursor == nil || *st.Cursor != "v1" || st.DataChangedAt == nil {
		t.Fatalf("/status: %s", body)
	}
	e := openStream(t, srv.URL+"/status/stream")
	e.next(t)
	store.mu.Lock()
	store.synced = time.Now() // an idle synchronizer's heartbeat: no event
	store.mu.Unlock()
	svc.Poll(ctx)
	store.mu.Lock()
	store.cursor = "v2"
	store.mu.Unlock()
	svc.Poll(ctx)
	if ev := e.next(t); ev.Cursor == nil || *ev.Cursor != "v2" {
		t.Errorf("event after the data changed: %+v, want cursor v2 (and no event for the heartbeat before it)", ev)
	}
	store.mu.Lock()
	store.cursor = ""
	store.mu.Unlock()
	svc.Poll(ctx)
	if ev := e.next(t); ev.Cursor != nil || ev.DataChangedAt != nil {
		t.Errorf("event after the cursor went away: cursor %v, dataChangedAt %v; want both null", ev.Cursor, ev.DataChangedAt)
	}
}

// TestStatusStreamEndsWhenTokenRevoked: an open stream whose token is revoked ends at its next
// heartbeat, so that no held request outlives its token.
func TestStatusStreamEndsWhenTokenRevoked(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte("tok\n"), 0o600)
	tokens, err := auth.NewTokens(nil, file, nil, nil, "default")
	if err != nil {
		t.Fatal(err)
	}
	svc := oneService(&switchStore{}, segments.Config{StaleAfter: time.Minute})
	srv := httptest.NewServer(handlers.New(defended(handlers.Config{StoreName: "embedded", Heartbeat: 10 * time.Millisecond}, tokens),
		svc))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/status/stream", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); resp.StatusCode != 200 || line != "event: status\n" {
		t.Fatalf("the stream: %d, %q %v", resp.StatusCode, line, err)
	}
	os.WriteFile(file, []byte("another\n"), 0o600)
	tokens.Reload()
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Errorf("the stream of a revoked token did not end: %v", err)
	}
}

// A stream that ends of itself (here the server stopping) long after its last write still
// ends with its last chunk, not a cut connection: the write deadline of its last event has
// passed by then.
func TestStreamEndsCleanlyLongAfterItsLastWrite(t *testing.T) {
	stop := make(chan struct{})
	const timeout = 50 * time.Millisecond
	srv := httptest.NewServer(handlers.New(handlers.Config{StoreName: "embedded", Stop: stop,
		StreamWriteTimeout: timeout, Heartbeat: time.Hour}, oneService(&switchStore{})))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/status/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for line := "x"; line != "\n"; {
		if line, err = br.ReadString('\n'); err != nil {
			t.Fatalf("first event: %v", err)
		}
	}
	time.Sleep(4 * timeout) // not a synchronization: the deadline must pass in real time
	close(stop)
	if rest, err := io.ReadAll(br); err != nil {
		t.Errorf("stream ended with %v after %q, want a clean end", err, rest)
	}
}
