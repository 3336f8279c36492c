package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/bigseg/bigseg/internal/auth"
)

// healthcheck runs "server healthcheck": it asks the server on this host for /livez and
// fails unless it answers 200. It is the Docker HEALTHCHECK, since the runtime image has no
// curl. It asks the metrics listener when there is one, else the API's, over HTTPS when that
// listener has TLS: it checks that its own process answers, so it verifies no certificate,
// and under mutual TLS it presents the server's own certificate (which works where one CA
// issues both, as cert-manager's CA issuers do; else set BIGSEG_METRICS_ADDR).
func healthcheck(ctx context.Context, args []string, cfg config, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "URL to check (default: /livez at BIGSEG_METRICS_ADDR or BIGSEG_ADDR, on 127.0.0.1 if it names no host)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	client := http.DefaultClient
	if *url == "" {
		var err error
		if *url, client, err = selfCheck(cfg); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("healthcheck: " + *url + " answered " + resp.Status)
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}

// selfCheck is the URL and client with which this host's server is checked.
func selfCheck(cfg config) (string, *http.Client, error) {
	addrVar, addr, tlsOn := "BIGSEG_ADDR", cfg.Addr, cfg.TLSCertFile != ""
	if cfg.MetricsAddr != "" {
		addrVar, addr, tlsOn = "BIGSEG_METRICS_ADDR", cfg.MetricsAddr, cfg.MetricsTLS
	}
	url, err := livezURL(addrVar, addr)
	if err != nil || !tlsOn {
		return url, http.DefaultClient, err
	}
	tc := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // our own process, on this host
	if cfg.TLSClientCAFile != "" {
		cert, err := auth.LoadKeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return "", nil, fmt.Errorf("healthcheck: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return "https" + strings.TrimPrefix(url, "http"), &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// livezURL is the /livez URL of a server listening on addr: its host, or the loopback address
// when it listens on every address.
func livezURL(name, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return "", fmt.Errorf("healthcheck: %s=%q has no fixed port: use --url", name, addr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/livez", nil
}
