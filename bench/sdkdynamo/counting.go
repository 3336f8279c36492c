package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// countingProxy is an HTTP proxy in front of moto that counts the DynamoDB calls through it
// (by X-Amz-Target) and the items they ask for, split by what they read: contexts' items
// (namespace big_segments_user) or the metadata (big_segments_metadata).
type countingProxy struct {
	url string // http://127.0.0.1:PORT, the endpoint to give clients

	srv *http.Server
	mu  sync.Mutex
	n   counts
}

// counts are a proxy's totals.
type counts struct {
	calls map[string]int64 // by operation: GetItem, BatchGetItem, Query, ...
	// Items asked for, by what they are, and the read units they cost: 1 a strongly
	// consistent read of an item under 4 KB, 0.5 an eventually consistent one (every item
	// here is far under 4 KB, and DynamoDB charges an absent item the same).
	memberships, metadata  float64
	membershipRCU, metaRCU float64
	queries                int64 // Query calls (neither reader makes one; their cost is not counted)
	// Calls that asked for a context's item (lookups), and those that asked only for the
	// metadata (status polls).
	lookupCalls, pollCalls int64
}

func (c counts) sub(b counts) counts {
	d := c
	d.calls = map[string]int64{}
	for k, v := range c.calls {
		d.calls[k] = v - b.calls[k]
	}
	d.memberships -= b.memberships
	d.metadata -= b.metadata
	d.membershipRCU -= b.membershipRCU
	d.metaRCU -= b.metaRCU
	d.queries -= b.queries
	d.lookupCalls -= b.lookupCalls
	d.pollCalls -= b.pollCalls
	return d
}

// total is the calls of every operation.
func (c counts) total() int64 {
	var n int64
	for _, v := range c.calls {
		n += v
	}
	return n
}

func startCountingProxy(target string) (*countingProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{url: "http://" + l.Addr().String(), n: counts{calls: map[string]int64{}}}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.count(r.Header.Get("X-Amz-Target"), body)
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

func (p *countingProxy) close() { _ = p.srv.Close() }

func (p *countingProxy) snapshot() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n.sub(counts{})
}

// The parts of a request that say what it reads.
type keyAttrs struct {
	Namespace struct{ S string } `json:"namespace"`
}

type readRequest struct {
	Key            keyAttrs `json:"Key"`
	ConsistentRead bool     `json:"ConsistentRead"`
	RequestItems   map[string]struct {
		Keys           []keyAttrs `json:"Keys"`
		ConsistentRead bool       `json:"ConsistentRead"`
	} `json:"RequestItems"`
}

// count adds a call of target (DynamoDB_20120810.GetItem, ...) with body to the totals.
func (p *countingProxy) count(target string, body []byte) {
	_, op, _ := strings.Cut(target, ".")
	var req readRequest
	_ = json.Unmarshal(body, &req) // a body of another shape asks for no item
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n.calls[op]++
	lookup, poll := false, false
	defer func() {
		switch {
		case lookup:
			p.n.lookupCalls++
		case poll:
			p.n.pollCalls++
		}
	}()
	item := func(k keyAttrs, consistent bool) {
		rcu := 0.5
		if consistent {
			rcu = 1
		}
		if strings.HasSuffix(k.Namespace.S, metadataKey) {
			p.n.metadata++
			p.n.metaRCU += rcu
			poll = true
		} else {
			lookup = true
			p.n.memberships++
			p.n.membershipRCU += rcu
		}
	}
	switch op {
	case "GetItem":
		item(req.Key, req.ConsistentRead)
	case "BatchGetItem":
		for _, t := range req.RequestItems {
			for _, k := range t.Keys {
				item(k, t.ConsistentRead)
			}
		}
	case "Query":
		p.n.queries++
	}
}
