package redis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// read reads a file f names with f.Read, or os.ReadFile if f.Read is nil.
func (f Files) read(path string) ([]byte, error) {
	if f.Read == nil {
		return os.ReadFile(path)
	}
	return f.Read(path)
}

// secret reads a password from file (a mounted Kubernetes secret: one trailing newline is not
// part of it); "" if no file is named.
func (f Files) secret(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := f.read(file)
	return strings.TrimRight(string(b), "\r\n"), err
}

// tlsConfig is what the files add to a rediss:// URL's TLS: a CA bundle to verify Redis with
// instead of the system roots, a client certificate and its key, and the name to verify
// against.
func (f Files) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{ServerName: f.TLSServerName}
	if f.TLSCA != "" {
		pem, err := f.read(f.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("CA file: no PEM certificate in it")
		}
	}
	if f.TLSCert != "" {
		cert, err := f.read(f.TLSCert)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		key, err := f.read(f.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("client certificate's key: %w", err)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
