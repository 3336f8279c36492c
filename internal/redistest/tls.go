package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are a test CA and certificates it issued, as PEM files.
type TLSFiles struct {
	CAFile                string
	ServerCert, ServerKey string // for 127.0.0.1 and localhost
	ClientCert, ClientKey string
	// Client verifies the server against the CA and presents the client certificate.
	Client *tls.Config
}

// NewTLS makes a CA, a server certificate and a client certificate in a temporary directory.
func NewTLS(t testing.TB) *TLSFiles {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bigseg test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	f := &TLSFiles{CAFile: writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)}
	issue := func(name string, serial int64, usage ...x509.ExtKeyUsage) (string, string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
	// The server certificate also allows client authentication, as certificates issued without
	// usages (cert-manager's default) do: bigseg's healthcheck presents it under mutual TLS.
	f.ServerCert, f.ServerKey = issue("server", 2, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	f.ClientCert, f.ClientKey = issue("client", 3, x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	f.Client = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	return f
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartTLS starts a redis-server that only accepts TLS with the given files, requiring client
// certificates, with extra arguments (such as ACL users).
func StartTLS(t testing.TB, f *TLSFiles, args ...string) *Server {
	t.Helper()
	return StartWith(t, Options{TLS: f.Client, Args: append([]string{
		"--tls-cert-file", f.ServerCert, "--tls-key-file", f.ServerKey, "--tls-ca-cert-file", f.CAFile,
		"--tls-auth-clients", "yes",
	}, args...)})
}
