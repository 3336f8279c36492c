package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/redistest"
)

// tlsDir holds the server's certificate files where a test can rotate them, as cert-manager
// does: by writing new files and renaming them into place.
type tlsDir struct {
	cert, key string
}

func newTLSDir(t *testing.T, f *redistest.TLSFiles) *tlsDir {
	t.Helper()
	dir := t.TempDir()
	d := &tlsDir{cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key")}
	d.install(t, f)
	return d
}

// install puts f's server certificate and key in place, each by a rename.
func (d *tlsDir) install(t *testing.T, f *redistest.TLSFiles) {
	t.Helper()
	for src, dst := range map[string]string{f.ServerCert: d.cert, f.ServerKey: d.key} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		tmp := dst + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			t.Fatal(err)
		}
	}
}

// httpsClient trusts the CAs of the given files (and presents a client certificate if
// clientCert), with keep-alive connections, asking for HTTP/2.
func httpsClient(t *testing.T, clientCert bool, trusted ...*redistest.TLSFiles) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	for _, f := range trusted {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		pool.AppendCertsFromPEM(pem)
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if clientCert {
		tc.Certificates = trusted[0].Client.Certificates
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func httpsURL(srv *server) string { return "https" + strings.TrimPrefix(srv.URL, "http") }

// HTTPS on BIGSEG_ADDR, over HTTP/1.1 even for a client that asks for HTTP/2: a client that
// trusts the CA gets answers, one that does not is refused, and a plain HTTP request is
// answered with an error.
func TestTLSListener(t *testing.T) {
	t.Parallel()
	files := redistest.NewTLS(t)
	d := newTLSDir(t, files)
	srv := start(t, map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json",
		"BIGSEG_TLS_CERT_FILE": d.cert, "BIGSEG_TLS_KEY_FILE": d.key})
	resp, err := httpsClient(t, false, files).Get(httpsURL(srv) + "/memberships/alice")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 1 || !strings.Contains(string(body), `"beta-users.g3":true`) {
		t.Errorf("HTTPS lookup: %s %d %s, want HTTP/1.1 200 with alice's memberships", resp.Proto, resp.StatusCode, body)
	}
	if _, err := httpsClient(t, false, redistest.NewTLS(t)).Get(httpsURL(srv) + "/livez"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the CA: %v, want a certificate error", err)
	}
	if resp, err := http.Get(srv.URL + "/livez"); err != nil {
		t.Errorf("plain HTTP to the HTTPS listener: %v, want an answer saying so", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the HTTPS listener: %d", resp.StatusCode)
		}
	}
	// TLS 1.2 at least: a client that offers at most TLS 1.1 is refused at the handshake.
	old := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	if conn, err := tls.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"), old); err == nil {
		conn.Close()
		t.Error("a TLS 1.1 client completed a handshake, want it refused")
	}
}

// A certificate rotated on disk is served to new connections without a restart, while a
// client on a kept-alive connection goes on looking up undisturbed. Files that do not load
// are refused: the last good certificate stays, and the log and a metric say so once.
func TestTLSRotation(t *testing.T) {
	t.Parallel()
	first, second := redistest.NewTLS(t), redistest.NewTLS(t)
	d := newTLSDir(t, first)
	srv := start(t, map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json",
		"BIGSEG_TLS_CERT_FILE": d.cert, "BIGSEG_TLS_KEY_FILE": d.key, "BIGSEG_METRICS_ADDR": "127.0.0.1:0"})
	base := httpsURL(srv)
	issuer := func() string { // the certificate a new connection gets
		c := httpsClient(t, false, first, second)
		resp, err := c.Get(base + "/livez")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		sum := sha256.Sum256(resp.TLS.PeerCertificates[0].Raw)
		return hex.EncodeToString(sum[:])
	}
	before := issuer()

	// A client keeps looking up on one kept-alive connection throughout.
	keeper := httpsClient(t, false, first, second)
	var lookups, failed, newConns atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
				if !info.Reused {
					newConns.Add(1)
				}
			}}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, base+"/memberships/alice", nil)
			resp, err := keeper.Do(req)
			if err != nil || resp.StatusCode != 200 {
				failed.Add(1)
			} else {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			lookups.Add(1)
		}
	})
	waitFor(t, "lookups on the kept-alive connection", func() bool { return lookups.Load() > 20 })
	d.install(t, second)
	waitFor(t, "the rotated certificate on new connections", func() bool { return issuer() != before })
	n := lookups.Load()
	waitFor(t, "more lookups after the rotation", func() bool { return lookups.Load() > n+20 })

	// A half-written key, then another: refused, the second certificate stays, said once.
	metricsURL := "http://" + srv.logs.wait(t, "side listener")["addr"].(string)
	rotated := issuer()
	for i, bad := range []string{"not a key", "still not a key"} {
		os.WriteFile(d.key, []byte("-----BEGIN EC PRIVATE KEY-----\n"+bad+"\n"), 0o600)
		waitFor(t, "the bad key tried", func() bool {
			if got := issuer(); got != rotated {
				t.Fatalf("after a bad key: serving %s, want the last good %s", got, rotated)
			}
			return scrapeValue(t, metricsURL, "bigseg_tls_certificate_reload_errors_total") == float64(i+1)
		})
	}
	close(stop)
	wg.Wait()
	if failed.Load() > 0 || newConns.Load() != 1 {
		t.Errorf("the kept-alive client: %d of %d lookups failed, %d connections opened (want 0 and 1)", failed.Load(), lookups.Load(), newConns.Load())
	}
	if lines := srv.logs.find("TLS files changed but do not load; still serving the last good certificate"); len(lines) != 1 {
		t.Errorf("%d log lines about the bad files, want 1", len(lines))
	}
	if got := scrapeValue(t, metricsURL, "bigseg_tls_certificate_reload_failing"); got != 1 {
		t.Errorf("bigseg_tls_certificate_reload_failing = %v, want 1", got)
	}
	d.install(t, second)
	waitFor(t, "the files loading again", func() bool {
		issuer()
		return scrapeValue(t, metricsURL, "bigseg_tls_certificate_reload_failing") == 0
	})
}

// scrapeValue reads one metric's value from a metrics listener.
func scrapeValue(t *testing.T, base, name string) float64 {
	t.Helper()
	s := &server{URL: base}
	return s.value(t, name)
}

// Mutual TLS: a client without a certificate from the client CA is refused at the handshake;
// with one, it is answered. The probes stay reachable on the metrics listener, plain, and the
// healthcheck passes either way.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	files := redistest.NewTLS(t)
	d := newTLSDir(t, files)
	env := map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json",
		"BIGSEG_TLS_CERT_FILE": d.cert, "BIGSEG_TLS_KEY_FILE": d.key, "BIGSEG_TLS_CLIENT_CA_FILE": files.CAFile,
		"BIGSEG_METRICS_ADDR": "127.0.0.1:0"}
	srv := start(t, env)
	if _, err := httpsClient(t, false, files).Get(httpsURL(srv) + "/memberships/alice"); err == nil {
		t.Error("a client without a certificate was answered")
	}
	resp, err := httpsClient(t, true, files).Get(httpsURL(srv) + "/memberships/alice")
	if err != nil {
		t.Fatalf("a client with a certificate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a client with a certificate: %d", resp.StatusCode)
	}
	ops := "http://" + srv.logs.wait(t, "side listener")["addr"].(string)
	for _, path := range []string{"/livez", "/readyz", "/metrics"} {
		resp, err := http.Get(ops + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s on the metrics listener: %d", path, resp.StatusCode)
		}
	}
	// The healthcheck: through the metrics listener, and through the API with the server's
	// own certificate when there is none.
	_, opsPort, _ := strings.Cut(strings.TrimPrefix(ops, "http://"), ":")
	_, apiPort, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	env["BIGSEG_METRICS_ADDR"], env["BIGSEG_ADDR"] = ":"+opsPort, ":"+apiPort
	if err := runProgram(context.Background(), env, io.Discard, io.Discard, "healthcheck"); err != nil {
		t.Errorf("healthcheck through the metrics listener: %v", err)
	}
	delete(env, "BIGSEG_METRICS_ADDR")
	if err := runProgram(context.Background(), env, io.Discard, io.Discard, "healthcheck"); err != nil {
		t.Errorf("healthcheck through the API, under mutual TLS: %v", err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	t.Parallel()
	files := redistest.NewTLS(t)
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BIGSEG_TLS_CERT_FILE": files.ServerCert}, "BIGSEG_TLS_CERT_FILE and BIGSEG_TLS_KEY_FILE go together"},
		{map[string]string{"BIGSEG_TLS_CLIENT_CA_FILE": files.CAFile}, "mutual TLS needs TLS"},
		{map[string]string{"BIGSEG_METRICS_TLS": "true"}, "BIGSEG_METRICS_TLS needs"},
		{map[string]string{"BIGSEG_TLS_CERT_FILE": files.ServerCert, "BIGSEG_TLS_KEY_FILE": files.ClientKey}, "BIGSEG_TLS_CERT_FILE/KEY_FILE"},
		{map[string]string{"BIGSEG_TLS_CERT_FILE": "/does/not/exist", "BIGSEG_TLS_KEY_FILE": files.ServerKey}, "TLS files"},
	}
	for _, tt := range tests {
		if err := runRefused(context.Background(), tt.env); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want an error containing %q", tt.env, err, tt.want)
		}
	}
}
