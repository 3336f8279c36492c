package healthcheck_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/internal/healthcheck"
	"github.com/bigseg/bigseg/internal/redistest"
)

// api is a server with only its API's listener, at addr.
func api(addr string, tlsOn bool) healthcheck.Server {
	return healthcheck.Server{API: healthcheck.Listener{Setting: "BIGSEG_ADDR", Addr: addr, TLS: tlsOn}}
}

// Self asks the host the address names, the loopback one for every address, over HTTPS with
// TLS; an address with no fixed port is an error naming its setting.
func TestSelf(t *testing.T) {
	for addr, want := range map[string]string{":8080": "http://127.0.0.1:8080/livez", "0.0.0.0:8080": "http://127.0.0.1:8080/livez",
		"[::]:8080": "http://[::1]:8080/livez", "10.1.2.3:8080": "http://10.1.2.3:8080/livez", "[fd00::1]:8080": "http://[fd00::1]:8080/livez"} {
		if got, _, err := healthcheck.Self(api(addr, false)); err != nil || got != want {
			t.Errorf("Self(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if got, c, err := healthcheck.Self(api(":8443", true)); err != nil || got != "https://127.0.0.1:8443/livez" || c == http.DefaultClient {
		t.Errorf("Self with TLS = %q, %v", got, err)
	}
	if _, _, err := healthcheck.Self(api(":0", false)); err == nil || !strings.Contains(err.Error(), "BIGSEG_ADDR") {
		t.Errorf("Self(:0) = %v, want an error naming BIGSEG_ADDR", err)
	}
}

// With an operators' listener, Self asks it, with its own TLS setting, and never the API's.
func TestSelfPrefersTheOperatorsListener(t *testing.T) {
	s := api(":8443", true)
	s.Metrics = healthcheck.Listener{Setting: "BIGSEG_METRICS_ADDR", Addr: ":9090"}
	if got, c, err := healthcheck.Self(s); err != nil || got != "http://127.0.0.1:9090/livez" || c != http.DefaultClient {
		t.Errorf("Self = %q, %v; want plain HTTP to :9090", got, err)
	}
	s.Metrics.Addr = ":0"
	if _, _, err := healthcheck.Self(s); err == nil || !strings.Contains(err.Error(), "BIGSEG_METRICS_ADDR") {
		t.Errorf("Self(metrics :0) = %v, want an error naming BIGSEG_METRICS_ADDR", err)
	}
}

// A URL given is asked as it is, whatever the listeners, with the default client.
func TestSelfGivenURL(t *testing.T) {
	s := api(":0", true)
	s.URL = "https://10.1.2.3:8443/livez"
	if got, c, err := healthcheck.Self(s); err != nil || got != s.URL || c != http.DefaultClient {
		t.Errorf("Self = %q, %v; want the URL given, with the default client", got, err)
	}
}

// Get fails unless the answer is 200, and says what it was.
func TestGet(t *testing.T) {
	code := http.StatusOK
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
	defer srv.Close()
	url, client, err := healthcheck.Self(api(strings.TrimPrefix(srv.URL, "https://"), true))
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

// Under mutual TLS the check presents the server's own certificate, which a listener that
// requires one of its CA's accepts; files that do not load are an error before any request.
func TestSelfMutualTLS(t *testing.T) {
	files := redistest.NewTLS(t)
	ca, err := os.ReadFile(files.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	s := api(strings.TrimPrefix(srv.URL, "https://"), true)
	url, client, err := healthcheck.Self(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := healthcheck.Get(context.Background(), client, url); err == nil {
		t.Error("answered without a client certificate")
	}
	s.MutualTLS, s.CertFile, s.KeyFile = true, files.ServerCert, files.ServerKey
	if url, client, err = healthcheck.Self(s); err != nil {
		t.Fatal(err)
	}
	if err := healthcheck.Get(context.Background(), client, url); err != nil {
		t.Errorf("with the server's certificate: %v", err)
	}
	s.KeyFile = files.ClientKey
	if _, _, err := healthcheck.Self(s); err == nil || !strings.HasPrefix(err.Error(), "healthcheck: ") {
		t.Errorf("a key that is not the certificate's: %v", err)
	}
}
