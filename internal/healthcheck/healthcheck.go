// Package healthcheck is the client side of server healthcheck, the Docker HEALTHCHECK (the
// runtime image has no curl): it asks a server on this host for /livez, on the listener and
// with the TLS its settings give (Self).
package healthcheck

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/bigseg/bigseg/internal/auth"
)

// Listener is one of the server's listeners, as its settings give it: the setting that names
// its address (for the error when that has no fixed port), the address, and whether it serves
// HTTPS.
type Listener struct {
	Setting, Addr string
	TLS           bool
}

// Server is the server on this host, as its settings give it: its API's listener and its
// operators' (Addr "" when it has none). Under mutual TLS the check presents the server's own
// certificate (CertFile, KeyFile), which works where one CA issues both, as cert-manager's CA
// issuers do; else give the server an operators' listener. A URL given (--url) is asked as it
// is, with http.DefaultClient.
type Server struct {
	URL               string
	API, Metrics      Listener
	MutualTLS         bool
	CertFile, KeyFile string
}

// Self is the /livez URL of the server s describes, and the client to ask it with: on its
// operators' listener when it has one, else on the API's; on the loopback address when the
// listener listens on every address. Over TLS it verifies no certificate (it checks its own
// process).
func Self(s Server) (string, *http.Client, error) {
	if s.URL != "" {
		return s.URL, http.DefaultClient, nil
	}
	l := s.API
	if s.Metrics.Addr != "" {
		l = s.Metrics
	}
	host, port, err := net.SplitHostPort(l.Addr)
	if err != nil || port == "" || port == "0" {
		return "", nil, fmt.Errorf("healthcheck: %s=%q has no fixed port: use --url", l.Setting, l.Addr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	url := "http://" + net.JoinHostPort(host, port) + "/livez"
	if !l.TLS {
		return url, http.DefaultClient, nil
	}
	tc := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // our own process, on this host
	if s.MutualTLS {
		cert, err := auth.LoadKeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return "", nil, fmt.Errorf("healthcheck: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return "https" + strings.TrimPrefix(url, "http"), &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// Get asks url with client, and fails unless it answers 200 before ctx ends.
func Get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("healthcheck: " + url + " answered " + resp.Status)
	}
	return nil
}
