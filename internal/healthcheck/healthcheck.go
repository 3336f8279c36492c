// Package healthcheck is the client side of server healthcheck, the Docker HEALTHCHECK (the
// runtime image has no curl): it asks a server on this host for /livez.
package healthcheck

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Self is the /livez URL of a server listening on addr (name is its setting, for the error
// when addr has no fixed port), on the loopback address when it listens on every address, and
// the client to ask it with. With tlsOn it asks over HTTPS and verifies no certificate (it
// checks its own process), presenting cert, when not nil, to a server that wants one.
func Self(name, addr string, tlsOn bool, cert *tls.Certificate) (string, *http.Client, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return "", nil, fmt.Errorf("healthcheck: %s=%q has no fixed port: use --url", name, addr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	url := "http://" + net.JoinHostPort(host, port) + "/livez"
	if !tlsOn {
		return url, http.DefaultClient, nil
	}
	tc := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // our own process, on this host
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
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
