package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/internal/healthcheck"
)

// runHealthcheck runs "server healthcheck": it asks the server on this host for /livez (see
// package healthcheck): the metrics listener when there is one, else the API's, over HTTPS
// when that listener has TLS. Under mutual TLS it presents the server's own certificate (which
// works where one CA issues both, as cert-manager's CA issuers do; else set
// BIGSEG_METRICS_ADDR).
func runHealthcheck(ctx context.Context, args []string, cfg config, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "URL to check (default: /livez at BIGSEG_METRICS_ADDR or BIGSEG_ADDR, on 127.0.0.1 if it names no host)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	client := http.DefaultClient
	if *url == "" {
		name, addr, tlsOn := "BIGSEG_ADDR", cfg.Addr, cfg.TLSCertFile != ""
		if cfg.MetricsAddr != "" {
			name, addr, tlsOn = "BIGSEG_METRICS_ADDR", cfg.MetricsAddr, cfg.MetricsTLS
		}
		var cert *tls.Certificate
		if tlsOn && cfg.TLSClientCAFile != "" {
			c, err := auth.LoadKeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
			if err != nil {
				return fmt.Errorf("healthcheck: %w", err)
			}
			cert = &c
		}
		var err error
		if *url, client, err = healthcheck.Self(name, addr, tlsOn, cert); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := healthcheck.Get(ctx, client, *url); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}
