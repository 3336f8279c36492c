package healthcheck_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/internal/healthcheck"
)

// Self asks the host the address names, the loopback one for every address, over HTTPS with
// TLS; an address with no fixed port is an error naming its setting.
func TestSelf(t *testing.T) {
	for addr, want := range map[string]string{":8080": "http://127.0.0.1:8080/livez", "0.0.0.0:8080": "http://127.0.0.1:8080/livez",
		"[::]:8080": "http://[::1]:8080/livez", "10.1.2.3:8080": "http://10.1.2.3:8080/livez", "[fd00::1]:8080": "http://[fd00::1]:8080/livez"} {
		if got, _, err := healthcheck.Self("BIGSEG_ADDR", addr, false, nil); err != nil || got != want {
			t.Errorf("Self(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if got, c, err := healthcheck.Self("BIGSEG_ADDR", ":8443", true, nil); err != nil || got != "https://127.0.0.1:8443/livez" || c == http.DefaultClient {
		t.Errorf("Self with TLS = %q, %v", got, err)
	}
	if _, _, err := healthcheck.Self("BIGSEG_METRICS_ADDR", ":0", false, nil); err == nil || !strings.Contains(err.Error(), "BIGSEG_METRICS_ADDR") {
		t.Errorf("Self(:0) = %v, want an error naming BIGSEG_METRICS_ADDR", err)
	}
}

// Get fails unless the answer is 200, and says what it was.
func TestGet(t *testing.T) {
	code := http.StatusOK
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
	defer srv.Close()
	url, client, err := healthcheck.Self("BIGSEG_ADDR", strings.TrimPrefix(srv.URL, "https://"), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := healthcheck.Get(context.Background(), client, url); err != nil {
		t.Errorf("200: %v", err)
	}
	code = http.StatusServiceUnavailable
	if err := healthcheck.Get(context.Background(), client, url); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("503: %v", err)
	}
}
