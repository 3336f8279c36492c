package ldbigseg_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/launchdarkly/go-sdk-common/v3/ldtime"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems/ldstoreimpl"

	"github.com/bigseg/bigseg/integrations/ldbigseg"
)

const testToken = "s3cr3t-T0ken.for~tests"

// wantErr describes the error a test expects; the zero value means no error.
type wantErr struct {
	unavailable bool   // errors.Is(err, ErrStoreUnavailable)
	tooLarge    bool   // errors.Is(err, ErrAnswerTooLarge)
	httpStatus  int    // errors.As(err, *HTTPError) with this StatusCode; 0: no HTTPError
	retryAfter  string // the HTTPError's RetryAfter
	contains    string // a part of the message
}

func (w wantErr) any() bool { return w != wantErr{} }

// checkErr fails the test unless err is as w describes, and never holds the bearer token.
func checkErr(t *testing.T, err error, w wantErr) {
	t.Helper()
	if !w.any() {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatal("no error, want one")
	}
	msg := err.Error()
	if strings.Contains(msg, testToken) {
		t.Errorf("the error holds the bearer token: %s", msg)
	}
	if got := errors.Is(err, ldbigseg.ErrStoreUnavailable); got != w.unavailable {
		t.Errorf("errors.Is(err, ErrStoreUnavailable) = %v, want %v; error: %s", got, w.unavailable, msg)
	}
	if got := errors.Is(err, ldbigseg.ErrAnswerTooLarge); got != w.tooLarge {
		t.Errorf("errors.Is(err, ErrAnswerTooLarge) = %v, want %v; error: %s", got, w.tooLarge, msg)
	}
	var httpErr *ldbigseg.HTTPError
	if errors.As(err, &httpErr) {
		if httpErr.StatusCode != w.httpStatus {
			t.Errorf("HTTPError.StatusCode = %d, want %d; error: %s", httpErr.StatusCode, w.httpStatus, msg)
		}
		if httpErr.RetryAfter != w.retryAfter {
			t.Errorf("HTTPError.RetryAfter = %q, want %q", httpErr.RetryAfter, w.retryAfter)
		}
	} else if w.httpStatus != 0 {
		t.Errorf("no HTTPError, want status %d; error: %s", w.httpStatus, msg)
	}
	if !strings.Contains(msg, w.contains) {
		t.Errorf("error %q does not say %q", msg, w.contains)
	}
}

// TestGetMembershipMapsEveryAnswer runs GetMembership against every kind of answer bigseg (or
// something in its place) can give, and checks the membership or the error the SDK gets.
func TestGetMembershipMapsEveryAnswer(t *testing.T) {
	const hash = hashWithEscapes
	huge := strings.Repeat("x", defaultMaxBody+1)
	tests := []struct {
		name         string
		handler      http.HandlerFunc
		wantIncluded []string
		wantExcluded []string
		wantErr      wantErr
	}{
		{
			name:         "200 HEALTHY with memberships",
			handler:      answer(200, "application/json", `{"contextHash":"`+hash+`","memberships":{"beta.g3":true,"blocked.g1":false,"vip.g2":true},"status":"HEALTHY"}`),
			wantIncluded: []string{"beta.g3", "vip.g2"},
			wantExcluded: []string{"blocked.g1"},
		},
		{
			name:         "200 STALE is a good answer",
			handler:      answer(200, "application/json", `{"contextHash":"`+hash+`","memberships":{"beta.g3":true},"status":"STALE"}`),
			wantIncluded: []string{"beta.g3"},
		},
		{
			name:    "200 with no membership",
			handler: answer(200, "application/json", `{"contextHash":"`+hash+`","memberships":{},"status":"HEALTHY"}`),
		},
		{
			name:         "200 without contextHash (lenient)",
			handler:      answer(200, "application/json", `{"memberships":{"blocked.g1":false},"status":"HEALTHY","cursor":"ignored"}`),
			wantExcluded: []string{"blocked.g1"},
		},
		{
			name:    "200 STORE_ERROR: bigseg marks its store unavailable",
			handler: answer(200, "application/json", `{"contextHash":"`+hash+`","memberships":{"beta.g3":true},"status":"STORE_ERROR"}`),
			wantErr: wantErr{unavailable: true, contains: "STORE_ERROR"},
		},
		{
			name:    "503 STORE_ERROR: the read failed",
			handler: answer(503, "application/json", `{"contextHash":"`+hash+`","status":"STORE_ERROR","error":"read membership: dial tcp 127.0.0.1:6379: connection refused"}`),
			wantErr: wantErr{unavailable: true, httpStatus: 503, contains: "connection refused"},
		},
		{
			name:    "503 from a proxy",
			handler: answer(503, "text/plain", "no healthy upstream\nmore"),
			wantErr: wantErr{httpStatus: 503, contains: "no healthy upstream"},
		},
		{
			name:    "401",
			handler: answer(401, "application/json", `{"error":"a valid bearer token is required"}`, "WWW-Authenticate", "Bearer"),
			wantErr: wantErr{httpStatus: 401, contains: "a valid bearer token is required"},
		},
		{
			name:    "429 with Retry-After",
			handler: answer(429, "application/json", `{"error":"rate limited"}`, "Retry-After", "1"),
			wantErr: wantErr{httpStatus: 429, retryAfter: "1", contains: "rate limit in front of bigseg"},
		},
		{
			name:    "400",
			handler: answer(400, "application/json", `{"error":"context hash is not valid padded standard base64"}`),
			wantErr: wantErr{httpStatus: 400, contains: "not valid padded standard base64"},
		},
		{
			name:    "404",
			handler: answer(404, "application/json", `{"error":"no such route"}`),
			wantErr: wantErr{httpStatus: 404, contains: "is the base URL bigseg's?"},
		},
		{
			name:    "500 with an HTML body",
			handler: answer(500, "text/html", "<html>Internal Server Error</html>\n<body>...</body>"),
			wantErr: wantErr{httpStatus: 500, contains: "<html>Internal Server Error</html>"},
		},
		{
			name:    "redirects are not followed",
			handler: answer(302, "", "", "Location", "http://elsewhere.invalid/memberships"),
			wantErr: wantErr{httpStatus: 302, contains: "does not follow"},
		},
		{
			name:    "200 that is not JSON",
			handler: answer(200, "text/html", "<html>captive portal</html>"),
			wantErr: wantErr{contains: `not bigseg's (Content-Type "text/html"`},
		},
		{
			name:    "200 with truncated JSON",
			handler: answer(200, "application/json", `{"contextHash":"`+hash+`","memberships":{"beta.g3":tr`),
			wantErr: wantErr{contains: "not bigseg's"},
		},
		{
			name:    "200 with JSON of another shape",
			handler: answer(200, "application/json", `{"memberships":["beta.g3"],"status":"HEALTHY"}`),
			wantErr: wantErr{contains: "not bigseg's"},
		},
		{
			name:    "200 without memberships",
			handler: answer(200, "application/json", `{"contextHash":"`+hash+`","status":"HEALTHY"}`),
			wantErr: wantErr{contains: "no memberships"},
		},
		{
			name:    "200 with an unknown status",
			handler: answer(200, "application/json", `{"contextHash":"`+hash+`","memberships":{},"status":"MAYBE"}`),
			wantErr: wantErr{contains: `unknown status "MAYBE"`},
		},
		{
			name:    "200 for another context",
			handler: answer(200, "application/json", `{"contextHash":"K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA=","memberships":{},"status":"HEALTHY"}`),
			wantErr: wantErr{contains: "another context hash"},
		},
		{
			name:    "body over the bound, with Content-Length",
			handler: answer(200, "application/json", huge, "Content-Length", strconv.Itoa(len(huge))),
			wantErr: wantErr{tooLarge: true, contains: "406313 bytes, more than the 406312 bytes this store reads"},
		},
		{
			name: "endless body, chunked",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"memberships":{},"pad":"`)) // a field the store skips, endless
				chunk := []byte(strings.Repeat("a", 32<<10))
				for r.Context().Err() == nil {
					if _, err := w.Write(chunk); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
			},
			wantErr: wantErr{tooLarge: true, contains: "more than the 406312 bytes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeBigseg(t, tt.handler)
			store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL).BearerToken(testToken))

			got, err := store.GetMembership(hash)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr.any() {
				if got != nil {
					t.Errorf("membership %v with the error, want nil", got)
				}
				return
			}
			want := ldstoreimpl.NewBigSegmentMembershipFromSegmentRefs(tt.wantIncluded, tt.wantExcluded)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("membership (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGetMetadataMapsEveryAnswer does the same for GetMetadata and GET /status.
func TestGetMetadataMapsEveryAnswer(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    ldtime.UnixMillisecondTime
		wantErr wantErr
	}{
		{
			name:    "available and synchronized",
			handler: answer(200, "application/json", `{"available":true,"stale":false,"lastSynchronizedOn":1795980183233,"lastSynchronizedAt":"2026-11-30T10:03:03.233Z","checkedAt":"2026-11-30T10:03:04Z","staleAfterSeconds":120,"store":"redis"}`),
			want:    1795980183233,
		},
		{
			name:    "never synchronized: zero, not an error",
			handler: answer(200, "application/json", `{"available":true,"stale":true,"lastSynchronizedOn":0,"lastSynchronizedAt":null,"checkedAt":"2026-11-30T10:03:04Z","staleAfterSeconds":120,"store":"redis"}`),
			want:    0,
		},
		{
			name:    "stale is the SDK's to judge",
			handler: answer(200, "application/json", `{"available":true,"stale":true,"lastSynchronizedOn":1234567890,"checkedAt":"2026-11-30T10:03:04Z"}`),
			want:    1234567890,
		},
		{
			name:    "fields added later are ignored",
			handler: answer(200, "application/json", `{"available":true,"stale":false,"lastSynchronizedOn":1795980183233,"syncCursor":"abc","dataChangedOn":1795980183000,"nested":{"x":[1,2]},"checkedAt":"2026-11-30T10:03:04Z"}`),
			want:    1795980183233,
		},
		{
			name:    "unavailable",
			handler: answer(200, "application/json", `{"available":false,"stale":false,"lastSynchronizedOn":1795980183233,"checkedAt":"2026-11-30T10:03:04Z"}`),
			wantErr: wantErr{unavailable: true, contains: "last status poll"},
		},
		{
			name:    "not polled yet",
			handler: answer(200, "application/json", `{"available":false,"stale":false,"lastSynchronizedOn":0,"lastSynchronizedAt":null,"checkedAt":null}`),
			wantErr: wantErr{unavailable: true, contains: "not polled it yet"},
		},
		{
			name:    "no available",
			handler: answer(200, "application/json", `{"lastSynchronizedOn":1795980183233}`),
			wantErr: wantErr{contains: `no "available"`},
		},
		{
			name:    "no lastSynchronizedOn",
			handler: answer(200, "application/json", `{"available":true}`),
			wantErr: wantErr{contains: `no "lastSynchronizedOn"`},
		},
		{
			name:    "negative lastSynchronizedOn",
			handler: answer(200, "application/json", `{"available":true,"lastSynchronizedOn":-5}`),
			wantErr: wantErr{contains: "negative"},
		},
		{
			name:    "lastSynchronizedOn of the wrong type",
			handler: answer(200, "application/json", `{"available":true,"lastSynchronizedOn":"yesterday"}`),
			wantErr: wantErr{contains: "not bigseg's"},
		},
		{
			name:    "not JSON",
			handler: answer(200, "text/plain", "OK"),
			wantErr: wantErr{contains: "not bigseg's"},
		},
		{
			name:    "JSON null",
			handler: answer(200, "application/json", "null"),
			wantErr: wantErr{contains: `no "available"`},
		},
		{
			name:    "401 from a proxy",
			handler: answer(401, "application/json", `{"error":"unauthorized"}`),
			wantErr: wantErr{httpStatus: 401, contains: "unauthorized"},
		},
		{
			name:    "502 from a proxy",
			handler: answer(502, "text/html", "<h1>Bad Gateway</h1>"),
			wantErr: wantErr{httpStatus: 502, contains: "Bad Gateway"},
		},
		{
			name:    "body over the bound",
			handler: answer(200, "application/json", `{"available":true,"lastSynchronizedOn":1,"pad":"`+strings.Repeat("x", defaultMaxBody)+`"}`),
			wantErr: wantErr{tooLarge: true, contains: "more than the 406312 bytes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeBigseg(t, tt.handler)
			store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL).BearerToken(testToken))

			got, err := store.GetMetadata()
			checkErr(t, err, tt.wantErr)
			if tt.wantErr.any() {
				return
			}
			if got.LastUpToDate != tt.want {
				t.Errorf("LastUpToDate = %d, want %d", got.LastUpToDate, tt.want)
			}
		})
	}
}

// TestRequests checks what the store sends: the routes under the base URL (with its path),
// the hash escaped in the query, the bearer token, and nothing else that matters.
func TestRequests(t *testing.T) {
	f := newFakeBigseg(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/behind/proxy/memberships":
			answer(200, "application/json", `{"memberships":{},"status":"HEALTHY"}`)(w, r)
		case "/behind/proxy/status":
			answer(200, "application/json", `{"available":true,"lastSynchronizedOn":1}`)(w, r)
		default:
			answer(404, "application/json", `{"error":"no such route"}`)(w, r)
		}
	})
	store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL+"/behind/proxy/").BearerToken(" "+testToken+"\n"))
	if _, err := store.GetMembership(hashWithEscapes); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetMetadata(); err != nil {
		t.Fatal(err)
	}

	type request struct{ Method, Path, RawQuery, Hash, Authorization, Accept string }
	var got []request
	for _, r := range f.Requests() {
		got = append(got, request{r.Method, r.URL.Path, r.URL.RawQuery, r.URL.Query().Get("contextHash"),
			r.Header.Get("Authorization"), r.Header.Get("Accept")})
	}
	want := []request{
		{"GET", "/behind/proxy/memberships", "contextHash=YeoIA%2FiFNSO3d9QUrOMTDNTT%2BS3izX%2F4aVwzfXnC7u4%3D", hashWithEscapes, "Bearer " + testToken, "application/json"},
		{"GET", "/behind/proxy/status", "", "", "Bearer " + testToken, "application/json"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}

	t.Run("no token, no Authorization", func(t *testing.T) {
		f := newFakeBigseg(t, answer(200, "application/json", `{"memberships":{},"status":"HEALTHY"}`))
		store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL))
		if _, err := store.GetMembership(hashWithEscapes); err != nil {
			t.Fatal(err)
		}
		if h, ok := f.Requests()[0].Header["Authorization"]; ok {
			t.Errorf("Authorization %q sent without a token", h)
		}
	})
}

// TestHostileServerNeverGetsTheTokenIntoErrors has a server echo the request's Authorization
// header into every part of its answers that can reach an error message.
func TestHostileServerNeverGetsTheTokenIntoErrors(t *testing.T) {
	echo := func(code int, contentType, format string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			auth := r.Header.Get("Authorization")
			w.Header().Set("Content-Type", contentType+"; x="+auth)
			w.Header().Set("Retry-After", auth)
			w.WriteHeader(code)
			fmt.Fprintf(w, format, auth)
		}
	}
	handlers := map[string]http.HandlerFunc{
		"401 JSON":           echo(401, "application/json", `{"error":"token %s refused"}`),
		"503 STORE_ERROR":    echo(503, "application/json", `{"status":"STORE_ERROR","error":"%s"}`),
		"500 text":           echo(500, "text/plain", "token: %s"),
		"429":                echo(429, "application/json", `{"error":"%s"}`),
		"200 not JSON":       echo(200, "text/plain", "%s"),
		"200 status":         echo(200, "application/json", `{"memberships":{},"status":"%s"}`),
		"200 bad map values": echo(200, "application/json", `{"memberships":{"%s":"yes"},"status":"HEALTHY"}`),
		"200 hash":           echo(200, "application/json", `{"contextHash":"%s","memberships":{},"status":"HEALTHY"}`),
	}
	for name, h := range handlers {
		t.Run(name, func(t *testing.T) {
			f := newFakeBigseg(t, h)
			store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL).BearerToken(testToken))
			_, err := store.GetMembership(hashWithEscapes)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), testToken) {
				t.Errorf("membership error holds the token: %v", err)
			}
			if _, err := store.GetMetadata(); err == nil || strings.Contains(err.Error(), testToken) {
				t.Errorf("status error is nil or holds the token: %v", err)
			}
			if got := f.Requests()[0].Header.Get("Authorization"); got != "Bearer "+testToken {
				t.Errorf("Authorization = %q: the server did not get the token, so the test proves nothing", got)
			}
		})
	}
}

// TestTransportErrors covers answers that never come: nothing listening, a server that does
// not answer in time (before the headers, or in the middle of the body).
func TestTransportErrors(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL("http://"+addr).BearerToken(testToken))
		_, err = store.GetMembership(hashWithEscapes)
		checkErr(t, err, wantErr{contains: "connection refused"})
		_, err = store.GetMetadata()
		checkErr(t, err, wantErr{contains: "connection refused"})
	})

	stall := func(afterHeaders bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if afterHeaders {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"memberships":{`))
				w.(http.Flusher).Flush()
			}
			<-r.Context().Done() // until the client gives up
		}
	}
	for name, h := range map[string]http.HandlerFunc{"no headers": stall(false), "body stalls": stall(true)} {
		t.Run("timeout, "+name, func(t *testing.T) {
			f := newFakeBigseg(t, h)
			store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL).Timeout(50*time.Millisecond))
			_, err := store.GetMembership(hashWithEscapes)
			checkErr(t, err, wantErr{contains: "no answer within 50ms"})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error is not a deadline: %v", err)
			}
			_, err = store.GetMetadata()
			checkErr(t, err, wantErr{contains: "no answer within 50ms"})
		})
	}
}

// TestKeepAlive checks that answers of every kind leave the connection reusable: a series of
// lookups, some failing, uses one connection.
func TestKeepAlive(t *testing.T) {
	codes := []int{200, 503, 401, 429, 404, 200}
	i := 0
	f := newFakeBigseg(t, func(w http.ResponseWriter, r *http.Request) {
		code := codes[i%len(codes)]
		i++ // requests are sequential
		if code == 200 {
			answer(200, "application/json", `{"memberships":{"a.g1":true},"status":"HEALTHY"}`)(w, r)
			return
		}
		answer(code, "application/json", `{"status":"STORE_ERROR","error":"x"}`)(w, r)
	})
	store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL))
	for range 3 * len(codes) {
		store.GetMembership(hashWithEscapes)
		store.GetMetadata()
	}
	if n := len(f.Requests()); n != 6*len(codes) {
		t.Fatalf("%d requests reached the server, want %d", n, 6*len(codes))
	}
	if n := f.opened.Load(); n != 1 {
		t.Errorf("%d connections opened for sequential requests, want 1 (kept alive)", n)
	}
}

// TestClose checks that Close interrupts a request in flight, that calls after it fail without
// a request, and that it closes the idle connections of the store's own transport, not those
// of a client it was given.
func TestClose(t *testing.T) {
	t.Run("interrupts a request in flight", func(t *testing.T) {
		entered := make(chan struct{})
		f := newFakeBigseg(t, func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-r.Context().Done()
		})
		store, err := ldbigseg.BigSegmentStore().BaseURL(f.URL).Timeout(time.Minute).Build(clientContext(nil))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := store.GetMembership(hashWithEscapes)
			done <- err
		}()
		<-entered
		store.Close()
		select {
		case err := <-done:
			if !errors.Is(err, ldbigseg.ErrClosed) {
				t.Errorf("interrupted request: %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second): // a bound: the request's own timeout is a minute
			t.Error("Close did not interrupt the request in flight")
		}
	})

	t.Run("calls after Close", func(t *testing.T) {
		f := newFakeBigseg(t, answer(200, "application/json", `{"available":true,"lastSynchronizedOn":1}`))
		store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL))
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := store.GetMembership(hashWithEscapes); !errors.Is(err, ldbigseg.ErrClosed) {
			t.Errorf("GetMembership after Close: %v, want ErrClosed", err)
		}
		if _, err := store.GetMetadata(); !errors.Is(err, ldbigseg.ErrClosed) {
			t.Errorf("GetMetadata after Close: %v, want ErrClosed", err)
		}
		if n := len(f.Requests()); n != 0 {
			t.Errorf("%d requests after Close, want 0", n)
		}
	})

	t.Run("closes its own idle connections", func(t *testing.T) {
		f := newFakeBigseg(t, answer(200, "application/json", `{"available":true,"lastSynchronizedOn":1}`))
		store, err := ldbigseg.BigSegmentStore().BaseURL(f.URL).Build(clientContext(nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.GetMetadata(); err != nil {
			t.Fatal(err)
		}
		if n := f.OpenConns(); n != 1 {
			t.Fatalf("%d open connections after a request, want 1 idle", n)
		}
		store.Close()
		waitFor(t, "the idle connection to close", func() bool { return f.OpenConns() == 0 })
	})

	t.Run("leaves a given client's connections alone", func(t *testing.T) {
		f := newFakeBigseg(t, answer(200, "application/json", `{"available":true,"lastSynchronizedOn":1}`))
		client := &http.Client{Transport: &http.Transport{}}
		defer client.CloseIdleConnections()
		store, err := ldbigseg.BigSegmentStore().BaseURL(f.URL).HTTPClient(client).Build(clientContext(nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.GetMetadata(); err != nil {
			t.Fatal(err)
		}
		store.Close()
		resp, err := client.Get(f.URL + "/status") // the client's idle connection, if still there
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if n := f.opened.Load(); n != 1 {
			t.Errorf("%d connections opened: Close closed the given client's idle connection", n)
		}
	})
}

// waitFor polls cond until it holds, failing the test after 10 s (a bound, not a timing).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
}

// Interface check, here where the SDK's type is at hand: the builder makes this store.
var _ subsystems.BigSegmentStore = (*ldbigseg.Store)(nil)
