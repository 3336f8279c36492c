package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
)

// TestDynamoDBMetrics: on the real program over moto, through the proxy, each lookup read
// from the table moves the DynamoDB metrics as it should: a read counts one request ok and
// the read capacity its answer consumed; a throttled read counts each attempt by its code;
// keys left unprocessed once count as retried. Whatever happened, the series' labels are
// of the fixed sets. The status poll runs once an hour here, so only the lookups read.
func TestDynamoDBMetrics(t *testing.T) { // not parallel: dynamotest.Env
	c, table := dynamoTable(t)
	relayWrite(t, c, table, "", "", "v1",
		dynamotest.Change{Hash: segments.Hash("alice"), AddIncluded: []string{"a.g1"}},
		dynamotest.Change{Hash: segments.Hash("bob"), AddIncluded: []string{"b.g1"}})
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	dynamotest.Env(t, proxy.URL)
	srv := start(t, map[string]string{"BIGSEG_DYNAMODB_TABLE": table, "BIGSEG_CACHE_SIZE": "0",
		"BIGSEG_STATUS_POLL_INTERVAL": "1h", "BIGSEG_STALE_AFTER": "2h"})
	waitFor(t, "ready", func() bool { resp, _ := srv.get(t, "/readyz"); return resp.StatusCode == 200 })

	requests := func(code string) float64 {
		v := srv.value(t, "bigseg_dynamodb_requests_total", "operation", "BatchGetItem", "code", code)
		return max(v, 0) // -1: no such series yet
	}
	capacity := func() float64 {
		return max(srv.value(t, "bigseg_dynamodb_consumed_read_capacity_units_total", "operation", "BatchGetItem"), 0)
	}
	retried := func() float64 { return srv.value(t, "bigseg_dynamodb_unprocessed_keys_retried_total") }
	durations := func() float64 {
		return max(srv.value(t, "bigseg_dynamodb_request_duration_seconds", "operation", "BatchGetItem"), 0)
	}

	throttled := func(int, func() dynamotest.Reply) dynamotest.Reply {
		return dynamotest.Error(http.StatusBadRequest, "ThrottlingException", "slow down")
	}
	tests := []struct {
		name       string
		rule       func(first int) dynamotest.Rule // first: the proxy's number of the test's first call
		path       string
		status     int
		okDelta    float64
		codeDelta  map[string]float64 // requests of error codes
		retryDelta float64
	}{
		{"a read", func(int) dynamotest.Rule { return nil }, "/memberships/alice", 200, 1, nil, 0},
		{"a throttled read", func(int) dynamotest.Rule { return throttled }, "/memberships/alice", 503, 0,
			map[string]float64{"ThrottlingException": dynamodb.DefaultMaxAttempts}, 0},
		{"a key unprocessed once", unprocessedOnce, "/memberships/bob", 200, 2, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := proxy.Calls("BatchGetItem") + 1
			proxy.On("BatchGetItem", tt.rule(first))
			defer proxy.On("BatchGetItem", nil)
			before := map[string]float64{"ok": requests("ok"), "capacity": capacity(), "retried": retried(), "durations": durations()}
			for code := range tt.codeDelta {
				before[code] = requests(code)
			}
			if resp, body := srv.get(t, tt.path); resp.StatusCode != tt.status {
				t.Fatalf("GET %s: %d %s, want %d", tt.path, resp.StatusCode, body, tt.status)
			}
			calls := float64(proxy.Calls("BatchGetItem") - first + 1)
			if got := requests("ok") - before["ok"]; got != tt.okDelta {
				t.Errorf("requests ok: +%v, want +%v", got, tt.okDelta)
			}
			for code, want := range tt.codeDelta {
				if got := requests(code) - before[code]; got != want {
					t.Errorf("requests %s: +%v, want +%v", code, got, want)
				}
			}
			if got := durations() - before["durations"]; got != calls {
				t.Errorf("durations observed: +%v, want +%v (one a request the proxy had)", got, calls)
			}
			if got := capacity() - before["capacity"]; (got > 0) != (tt.okDelta > 0) {
				t.Errorf("read capacity consumed: +%v, want some: %v", got, tt.okDelta > 0)
			}
			if got := retried() - before["retried"]; got != tt.retryDelta {
				t.Errorf("unprocessed keys retried: +%v, want +%v", got, tt.retryDelta)
			}
		})
	}

	operations, codes := append(dynamodb.Operations(), "other"), append(dynamodb.ErrorCodes(), "ok")
	for name, f := range srv.scrape(t) {
		if !strings.HasPrefix(name, "bigseg_dynamodb_") {
			continue
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				switch {
				case l.GetName() == "operation" && slices.Contains(operations, l.GetValue()):
				case l.GetName() == "code" && slices.Contains(codes, l.GetValue()):
				case l.GetName() == "le":
				default:
					t.Errorf("%s has the label %s=%q, not of the fixed sets", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// unprocessedOnce leaves the key of the proxy's call number first unprocessed, and passes
// the others.
func unprocessedOnce(first int) dynamotest.Rule {
	return func(n int, forward func() dynamotest.Reply) dynamotest.Reply {
		if n == first {
			return dynamotest.Unprocess(forward(), 1)
		}
		return forward()
	}
}
