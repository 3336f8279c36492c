package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"github.com/launchdarkly/go-sdk-common/v3/ldreason"
	ldeval "github.com/launchdarkly/go-server-sdk-evaluation/v3"
	"github.com/launchdarkly/go-server-sdk/v7/interfaces"
)

// provider is what the handler needs of ldstoreimpl.BigSegmentStoreWrapper.
type provider interface {
	GetMembership(contextKey string) (ldeval.BigSegmentMembership, ldreason.BigSegmentsStatus)
	GetStatus() interfaces.BigSegmentStoreStatus
}

// lookupResponse has the shape of bigseg's answer to GET /memberships/{contextKey}.
type lookupResponse struct {
	ContextKey  string          `json:"contextKey"`
	ContextHash string          `json:"contextHash"`
	Memberships map[string]bool `json:"memberships"`
	Status      string          `json:"status"`
}

// errorResponse is bigseg's answer to a lookup whose read failed.
type errorResponse struct {
	ContextKey  string `json:"contextKey"`
	ContextHash string `json:"contextHash"`
	Status      string `json:"status"`
	Error       string `json:"error"`
}

// server is the HTTP side: bigseg's lookup route, a readiness probe, and two counters.
type server struct {
	provider provider
	store    *store
	lookups  atomic.Int64
}

// newHandler lists every route.
func newHandler(p provider, st *store) http.Handler {
	s := &server{provider: p, store: st}
	r := chi.NewRouter()
	r.Get("/memberships/{contextKey}", s.getMembership)
	r.Get("/readyz", s.getReady)
	r.Get("/metrics", s.getMetrics)
	return r
}

// getMembership answers as bigseg does, from what the SDK's wrapper returns.
func (s *server) getMembership(w http.ResponseWriter, r *http.Request) {
	key := chi.URLParam(r, "contextKey")
	if r.URL.RawPath != "" { // chi hands over the escaped value then; see bigseg's handlers
		var err error
		if key, err = url.PathUnescape(key); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "context key is not validly percent-encoded"})
			return
		}
	}
	s.lookups.Add(1)
	got, status := s.provider.GetMembership(key)
	if status == ldreason.BigSegmentsStoreError {
		writeJSON(w, http.StatusServiceUnavailable, errorResponse{
			ContextKey: key, ContextHash: hashKey(key), Status: string(status),
			Error: "the Big Segment store could not be read",
		})
		return
	}
	resp := lookupResponse{ContextKey: key, Status: string(status)}
	if m, ok := got.(*membership); ok {
		resp.ContextHash, resp.Memberships = m.hash, m.refs()
	} else { // a cached "not found", which this store never returns
		resp.ContextHash, resp.Memberships = hashKey(key), map[string]bool{}
	}
	writeJSON(w, http.StatusOK, resp)
}

// getReady is 200 once the wrapper's status poll has read the store.
func (s *server) getReady(w http.ResponseWriter, _ *http.Request) {
	if !s.provider.GetStatus().Available {
		writeJSON(w, http.StatusServiceUnavailable, map[string]bool{"ready": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ready": true})
}

// getMetrics serves the lookups and the store reads in Prometheus's text format, so that the
// benchmark can compute the cache's hit ratio as it does for bigseg.
func (s *server) getMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE ldwrapper_lookups_total counter\nldwrapper_lookups_total %d\n", s.lookups.Load())
	fmt.Fprintf(w, "# TYPE ldwrapper_store_reads_total counter\nldwrapper_store_reads_total %d\n", s.store.reads.Load())
}

// writeJSON is the one place that writes a JSON body, with encoding/json.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// hashKey is the Big Segments hash of a context key: base64 of its SHA-256, as the SDK's.
func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.StdEncoding.EncodeToString(sum[:])
}
