package limit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStreamsBound: beyond its bound, a stream is refused with 503 and Retry-After; a stream
// that ends gives its slot back. MaxStreams holds the bound to half the listener's connections.
func TestStreamsBound(t *testing.T) {
	release, inside := make(chan struct{}), make(chan struct{}, 1)
	h := Streams(1, refuse)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inside <- struct{}{}; <-release }))
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		close(done)
	}()
	<-inside
	refused := httptest.NewRecorder()
	h.ServeHTTP(refused, httptest.NewRequest(http.MethodGet, "/", nil))
	if refused.Code != http.StatusServiceUnavailable || refused.Header().Get("Retry-After") == "" {
		t.Errorf("a second stream: %d %v, want 503 with Retry-After", refused.Code, refused.Header())
	}
	close(release)
	<-done
	second := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		close(second)
	}()
	<-inside // the slot came back: it ran
	<-second
	if l := NewListener(nil, 20); l.MaxStreams(15) != 10 || l.MaxStreams(4) != 4 {
		t.Errorf("MaxStreams: %d %d, want 10 and 4", l.MaxStreams(15), l.MaxStreams(4))
	}
}
