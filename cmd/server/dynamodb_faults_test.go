package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
)

// dynamoProcess starts the real program on table, reaching DynamoDB at endpoint, with short
// polls, no cache (every lookup reads the table) and a lookup timeout of a second (300 ms was
// less than moto_server took to answer a read on a busy machine), and kv on top.
func dynamoProcess(t *testing.T, endpoint, table string, kv ...string) *process {
	t.Helper()
	env := dynamotest.Vars(t, endpoint)
	for k, v := range map[string]string{"BIGSEG_DYNAMODB_TABLE": table, "BIGSEG_STATUS_POLL_INTERVAL": "100ms",
		"BIGSEG_CACHE_SIZE": "0", "BIGSEG_LOOKUP_TIMEOUT": "1s"} {
		env[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return startProcess(t, env)
}

// askUsers asks for user-from..user-from+n, all at once, and returns their answers in order.
func askUsers(base string, from, n int) []answer {
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = ask(http.DefaultClient, base+"/memberships/user-"+strconv.Itoa(from+i)) })
	}
	wg.Wait()
	return answers
}

// faultUsers are the contexts of the fault tests: user-i is included in seg-(i%7).g1.
const faultUsers = 20

func faultRef(i int) string { return "seg-" + strconv.Itoa(i%7) + ".g1" }

// batchAnswers asks for users from..from+n in one batch and returns each result's status,
// failing the test on an answer that is wrong: HEALTHY with other memberships than the table's.
func batchAnswers(t *testing.T, base string, from, n int) (statuses []string) {
	t.Helper()
	var keys []string
	for i := from; i < from+n; i++ {
		keys = append(keys, "user-"+strconv.Itoa(i))
	}
	body, _ := json.Marshal(map[string][]string{"contextKeys": keys})
	resp, err := http.Post(base+"/memberships", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Results []lookup }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || len(got.Results) != n {
		t.Fatalf("batch: %d, %v, %d results", resp.StatusCode, err, len(got.Results))
	}
	for j, r := range got.Results {
		i := from + j
		if r.Status == "HEALTHY" && (len(r.Memberships) != 1 || !r.Memberships[faultRef(i)]) {
			t.Errorf("user-%d: HEALTHY with %v, want {%s: true}", i, r.Memberships, faultRef(i))
		}
		statuses = append(statuses, r.Status)
	}
	return statuses
}

func readyz(base string) int {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDynamoDBFaults: on the real program, every fault of DynamoDB between it and the table
// (throttling, server errors, a hang, access denied, a part of a batch left unprocessed) is a
// JSON 503 STORE_ERROR for single lookups and STORE_ERROR in batches, never a wrong or empty
// answer; while the metadata cannot be read /readyz is 503, and the store's unavailability is
// logged once for the fault, with the AWS error code; after the fault, the next good poll
// makes it ready again and lookups answer. (Unprocessed keys fail only the contexts left
// unprocessed: the metadata is read, so /readyz stays 200.)
func TestDynamoDBFaults(t *testing.T) {
	parallelOnMoto(t)
	c, table := dynamoTable(t)
	var changes []dynamotest.Change
	for i := range faultUsers {
		changes = append(changes, dynamotest.Change{Hash: segments.Hash("user-" + strconv.Itoa(i)), AddIncluded: []string{faultRef(i)}})
	}
	relayWrite(t, c, table, "", "", "v1", changes...)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	p := dynamoProcess(t, proxy.URL, table)
	waitFor(t, "ready", func() bool { return readyz(p.URL) == 200 })

	fail := func(status int, code string) dynamotest.Rule {
		return func(int, func() dynamotest.Reply) dynamotest.Reply { return dynamotest.Error(status, code, "fault") }
	}
	tests := []struct {
		name string
		rule dynamotest.Rule
		code string // the code logged when the store becomes unavailable; "" if it stays available
	}{
		{"throttled", fail(http.StatusBadRequest, "ProvisionedThroughputExceededException"), "ProvisionedThroughputExceededException"},
		{"throttling exception", fail(http.StatusBadRequest, "ThrottlingException"), "ThrottlingException"},
		{"500", fail(http.StatusInternalServerError, "InternalServerError"), "InternalServerError"},
		{"503 without a body", func(int, func() dynamotest.Reply) dynamotest.Reply { return dynamotest.Reply{Status: 503} }, "http_5xx"},
		{"access denied", fail(http.StatusBadRequest, "AccessDeniedException"), "AccessDeniedException"},
		{"a hang", func(int, func() dynamotest.Reply) dynamotest.Reply { return dynamotest.Reply{Hang: true} }, "deadline_exceeded"},
		{"part of each batch unprocessed", func(_ int, forward func() dynamotest.Reply) dynamotest.Reply {
			r := forward()
			if strings.Contains(string(r.Body), "big_segments_metadata") {
				return r // the status poll's read
			}
			return dynamotest.Unprocess(r, 2)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unavailable := len(p.logs.find("big segment store unavailable"))
			proxy.On("BatchGetItem", tt.rule)
			if tt.code != "" {
				waitFor(t, "/readyz 503", func() bool { return readyz(p.URL) == 503 })
			}
			for i, a := range askUsers(p.URL, 0, faultUsers) { // at once: a read may take the whole lookup timeout
				if a.code != 503 || !a.ok {
					t.Fatalf("user-%d: %+v, want a JSON 503 STORE_ERROR", i, a)
				}
			}
			if tt.code != "" {
				if statuses := batchAnswers(t, p.URL, 0, faultUsers); strings.Count(strings.Join(statuses, " "), "STORE_ERROR") != faultUsers {
					t.Errorf("batch: %v, want STORE_ERROR for all", statuses)
				}
			} else { // a batch whose first call moto answers after the lookup timeout (CI's load) fails whole: ask again
				waitFor(t, "a batch with 2 keys a call left unprocessed answering STORE_ERROR for some, HEALTHY for the others", func() bool {
					errs := strings.Count(strings.Join(batchAnswers(t, p.URL, 0, faultUsers), " "), "STORE_ERROR")
					return errs > 0 && errs < faultUsers
				})
			}
			if tt.code == "" && readyz(p.URL) != 200 {
				t.Error("/readyz not 200 while the metadata is read")
			}
			proxy.On("BatchGetItem", nil)
			waitFor(t, "/readyz 200 after the fault", func() bool { return readyz(p.URL) == 200 })
			waitFor(t, "lookups after the fault", func() bool { return ask(http.DefaultClient, p.URL+"/memberships/user-1").code == 200 })
			lines := p.logs.find("big segment store unavailable")[unavailable:]
			switch {
			case tt.code == "" && len(lines) != 0:
				t.Errorf("store unavailable while only memberships were left unprocessed: %v", lines)
			case tt.code != "" && (len(lines) != 1 || lines[0]["code"] != tt.code):
				t.Errorf("unavailability logged %d times (%v), want once with code %q", len(lines), lines, tt.code)
			}
			if got := batchAnswers(t, p.URL, 0, faultUsers); strings.Contains(strings.Join(got, " "), "STORE_ERROR") {
				t.Errorf("batch after the fault: %v", got)
			}
		})
	}
}

// TestDynamoDBUnreachable: a closed port and a missing table make the program unready and
// every lookup a JSON 503, with the cause's code logged.
func TestDynamoDBUnreachable(t *testing.T) {
	parallelOnMoto(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, tt := range []struct {
		name, endpoint, table, code string
	}{
		{"a closed port", closed, "bigseg", "other"},
		{"a missing table", dynamotest.Shared(t).URL, "bigsegtest-no-such-table", "ResourceNotFoundException"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := dynamoProcess(t, tt.endpoint, tt.table)
			line := p.logs.wait(t, "big segment store unavailable")
			if line["code"] != tt.code {
				t.Errorf("logged %v, want code %q", line, tt.code)
			}
			if code := readyz(p.URL); code != 503 {
				t.Errorf("/readyz: %d", code)
			}
			for i := range 5 {
				if a := ask(http.DefaultClient, p.URL+"/memberships/user-"+strconv.Itoa(i)); a.code != 503 || !a.ok {
					t.Errorf("user-%d: %+v, want a JSON 503", i, a)
				}
			}
			if got := batchAnswers(t, p.URL, 0, 3); strings.Count(strings.Join(got, " "), "STORE_ERROR") != 3 {
				t.Errorf("batch: %v", got)
			}
		})
	}
}

// TestDynamoDBHungStatusReadIsBounded: a status read that DynamoDB never answers fails after
// about a second, as Redis's read timeout bounds Redis's, even with a lookup timeout of a
// minute: the program is unready within the 10 s the log wait allows.
func TestDynamoDBHungStatusReadIsBounded(t *testing.T) {
	parallelOnMoto(t)
	_, table := dynamoTable(t)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	proxy.On("BatchGetItem", func(int, func() dynamotest.Reply) dynamotest.Reply { return dynamotest.Reply{Hang: true} })
	p := dynamoProcess(t, proxy.URL, table, "BIGSEG_LOOKUP_TIMEOUT", "1m", "BIGSEG_WRITE_TIMEOUT", "2m")
	if line := p.logs.wait(t, "big segment store unavailable"); line["code"] != "deadline_exceeded" {
		t.Errorf("logged %v, want code deadline_exceeded", line)
	}
	if code := readyz(p.URL); code != 503 {
		t.Errorf("/readyz: %d", code)
	}
	proxy.On("BatchGetItem", nil)
	waitFor(t, "/readyz 200 once DynamoDB answers", func() bool { return readyz(p.URL) == 200 })
}

// TestDynamoDBSlowReadOverRESP: a membership read DynamoDB answers late (a hang, or an item
// that takes longer than the lookup timeout to come back) is an error reply on the
// Redis-protocol listener once the lookup timeout has passed, for the include and the exclude of
// the pair alike, never a silence or an empty set; the metadata is still read meanwhile.
func TestDynamoDBSlowReadOverRESP(t *testing.T) {
	parallelOnMoto(t)
	c, table := dynamoTable(t)
	relayWrite(t, c, table, "", "", "v1", dynamotest.Change{Hash: segments.Hash("user-1"), AddIncluded: []string{faultRef(1)}})
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	p := dynamoProcess(t, proxy.URL, table, "BIGSEG_RESP_ADDR", "127.0.0.1:0")
	waitFor(t, "ready", func() bool { return readyz(p.URL) == 200 })
	rc := respClient(t, respAddr(t, p.logs), goredis.Options{ReadTimeout: 10 * time.Second})
	include := "launchdarkly:big_segment_include:" + segments.Hash("user-1")
	exclude := "launchdarkly:big_segment_exclude:" + segments.Hash("user-1")
	if m, err := rc.SMembers(context.Background(), include).Result(); err != nil || len(m) != 1 {
		t.Fatalf("before the fault: %q, %v", m, err)
	}
	proxy.On("BatchGetItem", func(_ int, forward func() dynamotest.Reply) dynamotest.Reply {
		r := forward()
		if strings.Contains(string(r.Body), "big_segments_metadata") {
			return r // the status poll's read
		}
		return dynamotest.Reply{Hang: true}
	})
	for _, key := range []string{include, exclude} {
		err := rc.SMembers(context.Background(), key).Err()
		if err == nil || !strings.Contains(err.Error(), "could not be read") {
			t.Errorf("SMEMBERS %s while DynamoDB does not answer: %v, want an error reply", key, err)
		}
	}
	proxy.On("BatchGetItem", nil)
	waitFor(t, "answered again", func() bool {
		m, err := rc.SMembers(context.Background(), include).Result()
		return err == nil && len(m) == 1
	})
}

// TestDynamoDBAnswersThatSayNothing: on the real program with its cache, answers of
// DynamoDB that say nothing of the keys asked for ({}, an empty body, no table under
// Responses, a body cut to nothing under DynamoDB's own checksum) are STORE_ERROR, never
// "no membership"; given to the status poll as well, they make the store unavailable and the
// program unready, and the cache is not dropped. Once DynamoDB answers again, every answer is
// the table's: nothing wrong was cached. (Each case asks for contexts of its own, which no case before it cached.)
func TestDynamoDBAnswersThatSayNothing(t *testing.T) {
	parallelOnMoto(t)
	bodies := []struct {
		name    string
		rewrite func(dynamotest.Reply) dynamotest.Reply
	}{
		{"{}", func(r dynamotest.Reply) dynamotest.Reply { r.Body = []byte(`{}`); return r }},
		{"an empty body", func(r dynamotest.Reply) dynamotest.Reply { r.Body = nil; return r }},
		{"no table under Responses", func(r dynamotest.Reply) dynamotest.Reply { r.Body = []byte(`{"Responses":{}}`); return r }},
		{"cut to nothing under DynamoDB's checksum", func(r dynamotest.Reply) dynamotest.Reply {
			r.Body, r.KeepChecksum = nil, true
			return r
		}},
	}
	c, table := dynamoTable(t)
	var changes []dynamotest.Change
	for i := range 2 * len(bodies) * faultUsers {
		changes = append(changes, dynamotest.Change{Hash: segments.Hash("user-" + strconv.Itoa(i)), AddIncluded: []string{faultRef(i)}})
	}
	relayWrite(t, c, table, "", "", "v1", changes...)
	proxy := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	p := dynamoProcess(t, proxy.URL, table, "BIGSEG_CACHE_SIZE", "10000")
	waitFor(t, "ready", func() bool { return readyz(p.URL) == 200 })

	from := -faultUsers
	for _, b := range bodies {
		for _, status := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, status poll's too: %v", b.name, status), func(t *testing.T) {
				from += faultUsers
				drops := scrapeValue(t, p.URL, "bigseg_cache_invalidations_total")
				proxy.On("BatchGetItem", func(_ int, forward func() dynamotest.Reply) dynamotest.Reply {
					r := forward()
					if !status && strings.Contains(string(r.Body), "big_segments_metadata") {
						return r
					}
					return b.rewrite(r)
				})
				if status {
					waitFor(t, "/readyz 503", func() bool { return readyz(p.URL) == 503 })
				}
				if a := ask(http.DefaultClient, p.URL+"/memberships/user-"+strconv.Itoa(from)); a.code != 503 || !a.ok {
					t.Errorf("user-%d: %+v, want a JSON 503 STORE_ERROR", from, a)
				}
				if got := batchAnswers(t, p.URL, from, faultUsers); strings.Count(strings.Join(got, " "), "STORE_ERROR") != faultUsers {
					t.Errorf("batch: %v, want STORE_ERROR for all", got)
				}
				if !status && readyz(p.URL) != 200 {
					t.Error("/readyz not 200 while the metadata is read")
				}
				proxy.On("BatchGetItem", nil)
				waitFor(t, "/readyz 200 after the fault", func() bool { return readyz(p.URL) == 200 })
				if got := batchAnswers(t, p.URL, from, faultUsers); strings.Contains(strings.Join(got, " "), "STORE_ERROR") {
					t.Errorf("batch after the fault: %v", got)
				}
				if n := scrapeValue(t, p.URL, "bigseg_cache_invalidations_total"); n != drops {
					t.Errorf("the cache was dropped %v times, though the data never changed", n-drops)
				}
			})
		}
	}
}
