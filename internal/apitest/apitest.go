// Package apitest checks real HTTP responses against api/openapi.yaml, so that every test
// that talks to the API also tests the contract.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/bigseg/bigseg/api"
)

func init() {
	// Stream bodies are checked as text; CheckSchema checks each event's data.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
}

var (
	loadOnce sync.Once
	doc      *openapi3.T
	loadErr  error
)

// Spec returns the parsed and validated OpenAPI document.
func Spec(t testing.TB) *openapi3.T {
	t.Helper()
	loadOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, loadErr = loader.LoadFromData([]byte(api.OpenAPI))
		if loadErr == nil {
			loadErr = doc.Validate(loader.Context)
		}
	})
	if loadErr != nil {
		t.Fatalf("api/openapi.yaml: %v", loadErr)
	}
	return doc
}

// Template returns the spec path that serves a request's escaped path (URL.EscapedPath), or
// the path itself if none does. Matching is done here, on the escaped path's segments, rather
// than by a kin-openapi router, because context keys may hold an escaped "/", which path
// routers split on; a static segment is preferred to a parameter, as chi prefers it.
func Template(t testing.TB, escapedPath string) string {
	t.Helper()
	segs := strings.Split(escapedPath, "/")
	best, bestStatic := escapedPath, -1
	for tmpl := range Spec(t).Paths.Map() {
		tsegs := strings.Split(tmpl, "/")
		if len(tsegs) != len(segs) {
			continue
		}
		static := 0
		for i, ts := range tsegs {
			switch {
			case strings.HasPrefix(ts, "{") && segs[i] != "":
			case ts == segs[i]:
				static++
			default:
				static = -1
			}
			if static < 0 {
				break
			}
		}
		if static > bestStatic {
			best, bestStatic = tmpl, static
		}
	}
	return best
}

// Check validates a response (status code, headers, body) against the spec and returns the
// body. HEAD is checked as GET without a body, OPTIONS as a 204 without one (the spec lists
// neither, since every route has them). A response for a path or method the spec does not
// list must be a JSON error.
func Check(t testing.TB, req *http.Request, resp *http.Response) []byte {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	d := Spec(t)
	path := Template(t, req.URL.EscapedPath())
	item := d.Paths.Find(path)
	switch {
	case item == nil:
	case req.Method == http.MethodHead:
		if len(body) != 0 {
			t.Errorf("HEAD %s: answered with a body: %q", req.URL, body)
		}
		if item.Get == nil {
			t.Errorf("HEAD %s: the path has no GET", req.URL)
		}
		return body
	case req.Method == http.MethodOptions && resp.StatusCode == http.StatusNoContent:
		if len(body) != 0 || resp.Header.Get("Allow") == "" {
			t.Errorf("OPTIONS %s: body %q, Allow %q; want no body and Allow", req.URL, body, resp.Header.Get("Allow"))
		}
		return body
	}
	var op *openapi3.Operation
	if item != nil {
		op = item.GetOperation(req.Method)
	}
	if op == nil {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: unlisted route answered %d with Content-Type %q, want a JSON error", req.Method, req.URL, resp.StatusCode, ct)
		}
		return body
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req,
			Route:   &routers.Route{Spec: d, Path: path, PathItem: item, Method: req.Method, Operation: op},
		},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		t.Errorf("%s %s: response %d breaks api/openapi.yaml: %v\nbody: %s", req.Method, req.URL, resp.StatusCode, err, body)
	}
	return body
}

// Do sends req with client (http.DefaultClient if nil), checks the response with Check and
// returns it with its body.
func Do(t testing.TB, client *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return resp, Check(t, req, resp)
}

// CheckSchema validates a JSON document against a schema of components/schemas.
func CheckSchema(t testing.TB, name string, data []byte) {
	t.Helper()
	ref, ok := Spec(t).Components.Schemas[name]
	if !ok {
		t.Fatalf("api/openapi.yaml has no schema %q", name)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if err := ref.Value.VisitJSON(v); err != nil {
		t.Errorf("%s breaks schema %s: %v", data, name, err)
	}
}

// Decode unmarshals a JSON body into a T, failing the test if it cannot.
func Decode[T any](t testing.TB, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

// StuckWriter is a ResponseWriter whose writes wait for Release to be closed, like a client
// that reads nothing, or fail once a write deadline set through http.ResponseController has
// passed. Writing is closed at the first write.
type StuckWriter struct {
	*httptest.ResponseRecorder
	Writing  chan struct{}
	Release  chan struct{}
	once     sync.Once
	cutOnce  sync.Once
	cut      atomic.Bool
	deadline chan struct{} // closed when a past write deadline is set
}

// NewStuckWriter returns a StuckWriter whose writes wait.
func NewStuckWriter() *StuckWriter {
	return &StuckWriter{ResponseRecorder: httptest.NewRecorder(), Writing: make(chan struct{}), Release: make(chan struct{})}
}

// Cut says whether a write deadline cut the writes off.
func (s *StuckWriter) Cut() bool { return s.cut.Load() }

func (s *StuckWriter) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.Writing) })
	s.cutOnce.Do(func() { s.deadline = make(chan struct{}) })
	select {
	case <-s.Release:
		return s.ResponseRecorder.Write(p)
	case <-s.deadline:
		return 0, os.ErrDeadlineExceeded
	}
}

// WriteString hides the recorder's own, which would not wait.
func (s *StuckWriter) WriteString(str string) (int, error) { return s.Write([]byte(str)) }

// SetWriteDeadline is what http.ResponseController calls: once t passes, writes fail.
func (s *StuckWriter) SetWriteDeadline(t time.Time) error {
	s.cutOnce.Do(func() { s.deadline = make(chan struct{}) })
	expire := func() {
		if s.cut.CompareAndSwap(false, true) {
			close(s.deadline)
		}
	}
	if t.IsZero() {
		return nil
	}
	if d := time.Until(t); d > 0 {
		time.AfterFunc(d, expire)
	} else {
		expire()
	}
	return nil
}

// Flush is what http.ResponseController calls.
func (s *StuckWriter) Flush() {}
