package dynamotest

import (
	"bytes"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Reply is what the proxy answers to one call.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
	// Hang makes the proxy answer nothing until the client gives up (or the test ends).
	Hang bool
	// KeepChecksum sends Header's X-Amz-Crc32 as it is, whatever the body: a body cut short
	// in transit. Else the proxy sends the checksum of Body.
	KeepChecksum bool
}

// Rule decides the reply to the n-th call (from 1) of an operation; forward sends the call
// on to the server and returns its reply, for a rule that passes it or rewrites it.
type Rule func(n int, forward func() Reply) Reply

// Proxy is an HTTP proxy in front of a server, whose rules can throttle, fail, hang or
// rewrite calls of the operations they are set for; calls of other operations pass.
type Proxy struct {
	// URL is the proxy's endpoint.
	URL string

	target string
	done   chan struct{}
	mu     sync.Mutex
	rules  map[string]Rule
	calls  map[string]int
}

// NewProxy starts a proxy in front of target (a server's URL), closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	p := &Proxy{target: target, done: make(chan struct{}), rules: map[string]Rule{}, calls: map[string]int{}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, tr) }))
	t.Cleanup(func() {
		close(p.done)
		srv.Close()
		tr.CloseIdleConnections()
	})
	p.URL = srv.URL
	return p
}

// On sets the rule of op (such as "BatchGetItem", or "AssumeRoleWithWebIdentity" of a proxy
// in front of the server's STS); nil passes its calls again.
func (p *Proxy) On(op string, rule Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules[op] = rule
}

// Calls counts the calls of op the proxy has had.
func (p *Proxy) Calls(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[op]
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, tr http.RoundTripper) {
	op := r.Header.Get("X-Amz-Target")
	op = op[strings.LastIndex(op, ".")+1:]
	body, _ := io.ReadAll(r.Body)
	if op == "" { // a call of the query protocol, as STS's
		q, _ := url.ParseQuery(string(body))
		op = q.Get("Action")
	}
	p.mu.Lock()
	p.calls[op]++
	n, rule := p.calls[op], p.rules[op]
	p.mu.Unlock()
	forward := func() Reply {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			return Error(http.StatusBadGateway, "ProxyError", err.Error())
		}
		req.Header = r.Header.Clone()
		req.Header.Del("Accept-Encoding") // the reply's body is read, and may be rewritten
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return Error(http.StatusBadGateway, "ProxyError", err.Error())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	reply := Reply{}
	if rule == nil {
		reply = forward()
	} else {
		reply = rule(n, forward)
	}
	if reply.Hang {
		select {
		case <-r.Context().Done():
		case <-p.done:
		}
		return
	}
	for k, vs := range reply.Header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	// The client checks DynamoDB's replies against this checksum: a rewritten body needs its own.
	if !reply.KeepChecksum {
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(reply.Body)), 10))
	}
	w.WriteHeader(reply.Status)
	_, _ = w.Write(reply.Body)
}

// Error is an error reply of DynamoDB's form, with its code (such as
// "ProvisionedThroughputExceededException") and message.
func Error(status int, code, message string) Reply {
	body, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + code, "message": message})
	return Reply{Status: status, Body: body, Header: http.Header{
		"Content-Type":     {"application/x-amz-json-1.0"},
		"X-Amzn-Errortype": {code},
		"X-Amzn-Requestid": {"bigsegtest"},
	}}
}

// Unprocess rewrites a BatchGetItem reply so that n of the items it returns (all, if fewer)
// are returned as unprocessed keys instead, as DynamoDB does when throttled.
func Unprocess(reply Reply, n int) Reply {
	if reply.Status != http.StatusOK {
		return reply
	}
	var out struct {
		Responses       map[string][]map[string]json.RawMessage `json:"Responses"`
		UnprocessedKeys map[string]struct {
			Keys []map[string]json.RawMessage `json:"Keys"`
		} `json:"UnprocessedKeys"`
	}
	if err := json.Unmarshal(reply.Body, &out); err != nil {
		return Error(http.StatusBadGateway, "ProxyError", err.Error())
	}
	if out.UnprocessedKeys == nil {
		out.UnprocessedKeys = map[string]struct {
			Keys []map[string]json.RawMessage `json:"Keys"`
		}{}
	}
	for table, items := range out.Responses {
		u := out.UnprocessedKeys[table]
		for n > 0 && len(items) > 0 {
			it := items[0]
			u.Keys = append(u.Keys, map[string]json.RawMessage{"namespace": it["namespace"], "key": it["key"]})
			items, n = items[1:], n-1
		}
		out.Responses[table], out.UnprocessedKeys[table] = items, u
	}
	reply.Body, _ = json.Marshal(out)
	return reply
}
