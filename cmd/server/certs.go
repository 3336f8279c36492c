package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// certCheckInterval is the least time between two looks at the certificate files.
const certCheckInterval = time.Second

// certs serves the HTTP listeners' TLS configuration from PEM files: a certificate and key,
// and optionally a CA whose certificates clients must present (mutual TLS). It reads the files
// again when they change on disk, at most once a second, at a handshake: a rotation by
// cert-manager or Vault agent takes effect at the next connection, without a restart and
// without touching open ones. Files that no longer load (half written, unreadable, a key that
// does not match) are refused: the last good configuration stays in use, which is logged once
// and shown in a metric until the files load again.
type certs struct {
	certFile, keyFile, clientCAFile string
	log                             *slog.Logger
	observe                         func(failing bool, notAfter time.Time) // metrics

	mu      sync.Mutex
	checked time.Time
	files   [3][]byte   // the contents last tried
	config  *tls.Config // the last good one
	failing bool
}

// newCerts loads the files; at start, files that do not load are an error.
func newCerts(certFile, keyFile, clientCAFile string, log *slog.Logger) (*certs, error) {
	c := &certs{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile, log: log,
		observe: func(bool, time.Time) {}}
	files, err := c.read()
	if err != nil {
		return nil, err
	}
	if c.config, err = c.build(files); err != nil {
		return nil, err
	}
	c.files, c.checked = files, time.Now()
	return c, nil
}

// serverConfig is the listener's TLS configuration: TLS 1.2 at least, HTTP/1.1 (see http1Only),
// and per handshake the current certificate (and client CA).
func (c *certs) serverConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: c.configForClient}
}

func (c *certs) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); now.Sub(c.checked) >= certCheckInterval {
		c.checked = now
		c.reloadIfChanged()
	}
	return c.config, nil
}

// reloadIfChanged builds a new configuration if the files changed since last tried.
func (c *certs) reloadIfChanged() {
	files, err := c.read()
	if err == nil && equalFiles(files, c.files) {
		return
	}
	if err == nil {
		c.files = files
		var cfg *tls.Config
		if cfg, err = c.build(files); err == nil {
			c.config, c.failing = cfg, false
			notAfter := cfg.Certificates[0].Leaf.NotAfter
			c.observe(false, notAfter)
			c.log.Info("TLS certificate reloaded", "notAfter", notAfter.UTC().Format(time.RFC3339))
			return
		}
	}
	if !c.failing {
		c.log.Error("TLS files changed but do not load; still serving the last good certificate", "err", err.Error())
	}
	c.failing = true
	c.observe(true, c.config.Certificates[0].Leaf.NotAfter)
}

// read reads the files, whole.
func (c *certs) read() ([3][]byte, error) {
	var files [3][]byte
	for i, path := range []string{c.certFile, c.keyFile, c.clientCAFile} {
		if path == "" {
			continue
		}
		b, err := readSettingFile(path)
		if err != nil {
			return files, fmt.Errorf("TLS files: %w", err)
		}
		files[i] = b
	}
	return files, nil
}

// build makes a configuration from the files' contents.
func (c *certs) build(files [3][]byte) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(files[0], files[1])
	if err != nil {
		return nil, fmt.Errorf("BIGSEG_TLS_CERT_FILE/KEY_FILE: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		NextProtos: []string{"http/1.1"}}
	if c.clientCAFile != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(files[2]) {
			return nil, errors.New("BIGSEG_TLS_CLIENT_CA_FILE: no PEM certificate in it")
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// equalFiles reports whether two sets of file contents are the same.
func equalFiles(a, b [3][]byte) bool {
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
