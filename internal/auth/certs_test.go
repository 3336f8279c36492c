package auth_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/internal/redistest"
)

// served is the configuration a handshake would get now.
func served(t *testing.T, c *auth.Certificates) *tls.Config {
	t.Helper()
	cfg, err := c.ServerConfig().GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, string(b))
}

// TestCertificatesRotation: a new certificate is served from the first handshake once Run has
// looked, a check interval after it is written; files that do not load (a half-written key)
// keep the last good one, said once and reported as failing until the files load again.
func TestCertificatesRotation(t *testing.T) {
	one, two := redistest.NewTLS(t), redistest.NewTLS(t)
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		copyFile(t, one.ServerCert, dir+"/cert.pem")
		copyFile(t, one.ServerKey, dir+"/key.pem")
		var mu sync.Mutex
		var failing []bool
		var logs bytes.Buffer
		c, err := auth.NewCertificates(dir+"/cert.pem", dir+"/key.pem", "", []string{"http/1.1"},
			slog.New(slog.NewTextHandler(&logs, nil)), func(f bool, _ time.Time) { mu.Lock(); failing = append(failing, f); mu.Unlock() })
		if err != nil {
			t.Fatal(err)
		}
		runInBackground(t, c.Run)
		if served(t, c).ClientAuth != tls.NoClientCert || served(t, c).NextProtos[0] != "http/1.1" {
			t.Error("configuration without a client CA")
		}
		copyFile(t, two.ServerCert, dir+"/cert.pem")
		write(t, dir+"/key.pem", "-----BEGIN EC PRIVATE KEY-----\nhalf") // half written
		for range 3 {
			time.Sleep(auth.FileCheckInterval)
			synctest.Wait()
			if !bytes.Equal(served(t, c).Certificates[0].Certificate[0], leafDER(t, one)) {
				t.Fatalf("files that do not load replaced the certificate")
			}
		}
		copyFile(t, two.ServerKey, dir+"/key.pem")
		time.Sleep(auth.FileCheckInterval)
		synctest.Wait()
		if !bytes.Equal(served(t, c).Certificates[0].Certificate[0], leafDER(t, two)) {
			t.Error("the new certificate is not served")
		}
		if n := strings.Count(logs.String(), "do not load"); n != 1 {
			t.Errorf("logged %d times, want once:\n%s", n, logs.String())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(failing) != 3 || failing[0] || !failing[1] || failing[2] {
			t.Errorf("observed %v, want [false true false]", failing)
		}
	})
}

// TestHandshakesDoNotReadFiles: a handshake serves the configuration last built; without Run,
// new files are not seen however long one waits, until Reload (SIGHUP).
func TestHandshakesDoNotReadFiles(t *testing.T) {
	one, two := redistest.NewTLS(t), redistest.NewTLS(t)
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		copyFile(t, one.ServerCert, dir+"/cert.pem")
		copyFile(t, one.ServerKey, dir+"/key.pem")
		c, err := auth.NewCertificates(dir+"/cert.pem", dir+"/key.pem", "", nil, slog.New(slog.DiscardHandler), func(bool, time.Time) {})
		if err != nil {
			t.Fatal(err)
		}
		copyFile(t, two.ServerCert, dir+"/cert.pem")
		copyFile(t, two.ServerKey, dir+"/key.pem")
		time.Sleep(10 * auth.FileCheckInterval)
		if !bytes.Equal(served(t, c).Certificates[0].Certificate[0], leafDER(t, one)) {
			t.Error("a handshake read the files")
		}
		c.Reload()
		if !bytes.Equal(served(t, c).Certificates[0].Certificate[0], leafDER(t, two)) {
			t.Error("Reload did not serve the new certificate")
		}
	})
}

// leafDER is the server certificate of f.
func leafDER(t *testing.T, f *redistest.TLSFiles) []byte {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	return pair.Certificate[0]
}

func TestCertificatesClientCA(t *testing.T) {
	f := redistest.NewTLS(t)
	c, err := auth.NewCertificates(f.ServerCert, f.ServerKey, f.CAFile, nil, slog.New(slog.DiscardHandler), func(bool, time.Time) {})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := served(t, c); cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil {
		t.Errorf("with a client CA: %v %v", cfg.ClientAuth, cfg.ClientCAs)
	}
	dir := t.TempDir()
	write(t, dir+"/ca.pem", "not a certificate")
	for _, files := range [][3]string{
		{f.ServerCert, f.ServerKey, dir + "/ca.pem"},
		{f.ServerCert, f.ClientKey, ""},
		{dir + "/missing.pem", f.ServerKey, ""},
	} {
		if _, err := auth.NewCertificates(files[0], files[1], files[2], nil, slog.New(slog.DiscardHandler), func(bool, time.Time) {}); err == nil {
			t.Errorf("%v: loaded", files)
		}
	}
}

// TestCertificatesRemovedAndPutBack: files removed then put back unchanged are in use again,
// so the failure they were reported as is over, and a second removal is a new failure,
// logged again.
func TestCertificatesRemovedAndPutBack(t *testing.T) {
	one := redistest.NewTLS(t)
	dir := t.TempDir()
	copyFile(t, one.ServerCert, dir+"/cert.pem")
	copyFile(t, one.ServerKey, dir+"/key.pem")
	var failing []bool
	var logs bytes.Buffer
	c, err := auth.NewCertificates(dir+"/cert.pem", dir+"/key.pem", "", nil,
		slog.New(slog.NewTextHandler(&logs, nil)), func(f bool, _ time.Time) { failing = append(failing, f) })
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := os.Rename(dir+"/cert.pem", dir+"/aside"); err != nil {
			t.Fatal(err)
		}
		c.Reload()
		if err := os.Rename(dir+"/aside", dir+"/cert.pem"); err != nil {
			t.Fatal(err)
		}
		c.Reload()
	}
	if got, want := fmt.Sprint(failing), "[false true false true false]"; got != want {
		t.Errorf("removed and put back twice: observed %s, want %s", got, want)
	}
	if n := strings.Count(logs.String(), "do not load"); n != 2 {
		t.Errorf("two removals logged %d times, want twice:\n%s", n, logs.String())
	}
}

// No certificate file is no TLS: a nil Certificates, whose methods do nothing and whose
// configuration is none.
func TestNoCertificates(t *testing.T) {
	c, err := auth.NewCertificates("", "", "", nil, slog.New(slog.DiscardHandler), func(bool, time.Time) { t.Error("observed") })
	if err != nil || c != nil {
		t.Fatalf("NewCertificates with no files = %v, %v; want nil, nil", c, err)
	}
	c.Reload()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Run(ctx); err != nil || c.ServerConfig() != nil {
		t.Errorf("Run = %v, ServerConfig = %v; want nil, nil", err, c.ServerConfig())
	}
}
