package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
)

// fuzzHandler is the API over the embedded store, with small limits so that fuzzing reaches
// them. Fuzz inputs go straight to ServeHTTP: no network in the loop.
func fuzzHandler(t testing.TB) http.Handler {
	t.Helper()
	f := &fixture.Fixture{Contexts: []fixture.Context{{Key: "alice", Hash: segments.Hash("alice"), Included: []string{"a.g1"}}}}
	svc := oneService(memory.New(f, nilTime))
	return handlers.New(handlers.Config{StoreName: "embedded", MaxKeyBytes: 64, MaxBatch: 20, MaxBodyBytes: 4096}, svc)
}

// checkAnswer fails on a 5xx, a non-JSON body, or a success that is not what was asked.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, allowed ...int) map[string]any {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	ok := false
	for _, c := range allowed {
		ok = ok || rec.Code == c
	}
	if !ok {
		t.Fatalf("status %d, want one of %v: %s", rec.Code, allowed, rec.Body)
	}
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("body is not a JSON object: %q", rec.Body)
	}
	if rec.Code != 200 {
		if msg, _ := v["error"].(string); msg == "" {
			t.Fatalf("error response without an error message: %s", rec.Body)
		}
	}
	return v
}

func FuzzLookupPath(f *testing.F) {
	for _, s := range []string{"alice", "a%2Fb", "%", "%zz", "%FF", "zo%C3%AB", "a b", "a+b", "..", "%00", strings.Repeat("x", 70)} {
		f.Add(s)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse("http://bigseg/memberships/" + raw)
		if err != nil || u.Path == "" {
			return // not a request a client could send
		}
		req := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: "bigseg"}
		req = req.WithContext(context.Background())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		v := checkAnswer(t, rec, 200, 400, 404, 405)
		if rec.Code == 200 {
			key, _ := v["contextKey"].(string)
			if key == "" || !utf8.ValidString(key) || len(key) > 64 || v["contextHash"] != segments.Hash(key) {
				t.Fatalf("200 for key %q with hash %v", key, v["contextHash"])
			}
		}
	})
}

func FuzzHashQuery(f *testing.F) {
	for _, s := range []string{"contextHash=" + url.QueryEscape(segments.Hash("alice")), "contextHash=" + segments.Hash("alice"),
		"contextHash=", "contextHash=%zz", "contextHash=a&contextHash=b", "x=1", "contextHash=-_-_"} {
		f.Add(s)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, query string) {
		u := &url.URL{Path: "/memberships", RawQuery: query}
		req := (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: "bigseg"}).WithContext(context.Background())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		v := checkAnswer(t, rec, 200, 400)
		if rec.Code == 200 {
			hash, _ := v["contextHash"].(string)
			if segments.ValidateHash(hash) != nil {
				t.Fatalf("200 for invalid hash %q", hash)
			}
		}
	})
}

func FuzzBatchBody(f *testing.F) {
	for _, s := range []string{`{"contextKeys":["alice","bob"]}`, `{"contextHashes":["` + segments.Hash("alice") + `"]}`, `{}`, ``, `[]`,
		`{"contextKeys":[1]}`, `{"contextKeys":["a"],"x":1}`, `{"contextKeys":null}`, `{} {}`, "{\"contextKeys\":[\"\xff\"]}"} {
		f.Add([]byte(s))
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/memberships", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		v := checkAnswer(t, rec, 200, 400, 413)
		if rec.Code == 200 {
			var in struct{ ContextKeys, ContextHashes []string }
			if err := json.Unmarshal(body, &in); err != nil {
				t.Fatalf("200 for a body encoding/json rejects: %v", err)
			}
			results, _ := v["results"].([]any)
			if len(results) != len(in.ContextKeys)+len(in.ContextHashes) {
				t.Fatalf("%d results for %d keys and %d hashes", len(results), len(in.ContextKeys), len(in.ContextHashes))
			}
		}
	})
}
