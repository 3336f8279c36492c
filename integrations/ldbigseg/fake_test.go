package ldbigseg_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/launchdarkly/go-sdk-common/v3/ldlog"
	"github.com/launchdarkly/go-sdk-common/v3/ldlogtest"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems"

	"github.com/bigseg/bigseg/integrations/ldbigseg"
)

// hashWithEscapes is a context hash (of "dave") with each character a query string must
// escape: '+', '/' and '='.
const hashWithEscapes = "YeoIA/iFNSO3d9QUrOMTDNTT+S3izX/4aVwzfXnC7u4="

// fakeBigseg is an in-process HTTP server standing in for bigseg where a test needs answers
// that the real one does not give (the error mapping, hostile servers). It records the
// requests it got and counts its connections.
type fakeBigseg struct {
	*httptest.Server
	opened, closed atomic.Int64

	mu       sync.Mutex
	requests []*http.Request
}

func newFakeBigseg(t *testing.T, h http.HandlerFunc) *fakeBigseg {
	t.Helper()
	f := &fakeBigseg{}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Clone(r.Context()))
		f.mu.Unlock()
		h(w, r)
	}))
	f.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			f.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			f.closed.Add(1)
		}
	}
	f.Start()
	t.Cleanup(f.Close)
	return f
}

// Requests returns the requests received so far.
func (f *fakeBigseg) Requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.requests...)
}

// OpenConns is the number of client connections open now.
func (f *fakeBigseg) OpenConns() int64 { return f.opened.Load() - f.closed.Load() }

// clientContext is what the SDK gives a store's Build: here, loggers that keep what was logged.
func clientContext(log *ldlogtest.MockLog) subsystems.ClientContext {
	loggers := ldlog.NewDisabledLoggers()
	if log != nil {
		loggers = log.Loggers
	}
	return subsystems.BasicClientContext{Logging: subsystems.LoggingConfiguration{Loggers: loggers}}
}

// buildStore builds the store and closes it when the test ends.
func buildStore(t *testing.T, b *ldbigseg.StoreBuilder) subsystems.BigSegmentStore {
	t.Helper()
	s, err := b.Build(clientContext(nil))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// answer returns a handler that answers with code, body and headers (name, value pairs).
func answer(code int, contentType, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
		w.Write([]byte(body))
	}
}
