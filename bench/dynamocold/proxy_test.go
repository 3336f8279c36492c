package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProxyCounts(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }))
	defer backend.Close()
	p, err := startProxy(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	for _, call := range []struct{ target, body string }{
		{"DynamoDB_20120810.GetItem", `{"Key": {"namespace": {"S": "big_segments_user"}, "key": {"S": "h1"}}}`},
		{"DynamoDB_20120810.BatchGetItem", `{"RequestItems": {"t": {"Keys": [
			{"namespace": {"S": "p:big_segments_user"}, "key": {"S": "h1"}},
			{"namespace": {"S": "p:big_segments_user"}, "key": {"S": "h2"}}]}}}`},
		{"DynamoDB_20120810.BatchGetItem", `{"RequestItems": {"t": {"Keys": [
			{"namespace": {"S": "big_segments_metadata"}, "key": {"S": "big_segments_metadata"}}]}}}`},
	} {
		req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(call.body))
		req.Header.Set("X-Amz-Target", call.target)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := counts{calls: map[string]int64{"GetItem": 1, "BatchGetItem": 1}, items: 3, polls: 1}
	if d := cmp.Diff(want, p.snapshot(), cmp.AllowUnexported(counts{})); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
}
