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

// proxy is an HTTP proxy in front of moto that counts the DynamoDB calls through it and the
// contexts' items they ask for (bench/sdkdynamo's counting proxy, cut to what this needs).
type proxy struct {
	url string // http://127.0.0.1:PORT, the endpoint to give the server
	srv *http.Server

	mu sync.Mutex
	n  counts
}

// counts are a proxy's totals of calls that asked for contexts' items (status polls, which
// ask for the metadata only, apart).
type counts struct {
	calls map[string]int64 // by operation: GetItem, BatchGetItem
	items int64            // contexts' items asked for
	polls int64            // calls that asked for the metadata only
}

func (c counts) sub(b counts) counts {
	d := counts{calls: map[string]int64{}, items: c.items - b.items, polls: c.polls - b.polls}
	for k, v := range c.calls {
		d.calls[k] = v - b.calls[k]
	}
	return d
}

func (c counts) total() int64 {
	var n int64
	for _, v := range c.calls {
		n += v
	}
	return n
}

func startProxy(target string) (*proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{url: "http://" + l.Addr().String(), n: counts{calls: map[string]int64{}}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}
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

func (p *proxy) close() { _ = p.srv.Close() }

func (p *proxy) snapshot() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n.sub(counts{})
}

type keyAttrs struct {
	Namespace struct{ S string } `json:"namespace"`
}

type readRequest struct {
	Key          keyAttrs `json:"Key"`
	RequestItems map[string]struct {
		Keys []keyAttrs `json:"Keys"`
	} `json:"RequestItems"`
}

// count adds a call of target (DynamoDB_20120810.GetItem, ...) with body to the totals.
func (p *proxy) count(target string, body []byte) {
	_, op, _ := strings.Cut(target, ".")
	var req readRequest
	_ = json.Unmarshal(body, &req) // a body of another shape asks for no item
	var items int64
	isContext := func(k keyAttrs) bool { return strings.HasSuffix(k.Namespace.S, "big_segments_user") }
	switch op {
	case "GetItem":
		if isContext(req.Key) {
			items++
		}
	case "BatchGetItem":
		for _, t := range req.RequestItems {
			for _, k := range t.Keys {
				if isContext(k) {
					items++
				}
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if items == 0 {
		p.n.polls++
		return
	}
	p.n.calls[op]++
	p.n.items += items
}
