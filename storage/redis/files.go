package redis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/bigseg/bigseg/internal/auth"
)

// ReadSecret reads a password from file (a mounted Kubernetes secret: one trailing newline is
// not part of it), for ClientOptions; "" if no file is named.
func ReadSecret(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := auth.ReadSettingFile(file)
	return strings.TrimRight(string(b), "\r\n"), err
}

// TLSFiles is what files add to a rediss:// URL's TLS, for ClientOptions.TLS: a CA bundle to
// verify Redis with instead of the system roots, a client certificate and its key, and the
// name to verify against; each "" for none.
func TLSFiles(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	tc := &tls.Config{ServerName: serverName}
	if caFile != "" {
		pem, err := auth.ReadSettingFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("CA file: no PEM certificate in it")
		}
	}
	if certFile != "" {
		cert, err := auth.LoadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
