package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheck runs "server healthcheck": it asks the server on this host for /livez and
// fails unless it answers 200. It is the Docker HEALTHCHECK, since the runtime image has no
// curl.
func healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "URL to check (default: /livez on the port of BIGSEG_ADDR, on 127.0.0.1)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		cfg, err := loadConfig()
		if err != nil {
			return err
		}
		_, port, err := net.SplitHostPort(cfg.Addr)
		if err != nil || port == "" || port == "0" {
			return fmt.Errorf("healthcheck: BIGSEG_ADDR=%q has no fixed port: use --url", cfg.Addr)
		}
		*url = "http://" + net.JoinHostPort("127.0.0.1", port) + "/livez"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
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
