package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Certificates is a listener's TLS configuration from PEM files: a certificate and key, and
// optionally a CA whose certificates clients must present (mutual TLS). Run reads the files
// again once per FileCheckInterval, and Reload (SIGHUP) at once; a handshake only loads the
// configuration last built, and never reads a file. So a rotation by cert-manager or Vault
// agent takes effect within about a second, at the next connection, without a restart and
// without touching open ones. Files that no longer load (half written, unreadable, a key that
// does not match) are refused: the last good configuration stays in use, which is logged once
// and reported to observe until the files load again.
type Certificates struct {
	certFile, keyFile, clientCAFile string
	protos                          []string
	log                             *slog.Logger
	observe                         func(failing bool, notAfter time.Time)

	config atomic.Pointer[tls.Config] // the last good one: handshakes only load it

	mu       sync.Mutex // one reload at a time; guards what follows
	files    [3]string  // the contents last tried
	filesBad bool       // whether files do not load
	readErr  string     // the last read's error, so that a file that stays unreadable counts once
	failing  bool
}

// NewCertificates loads the files and reports the certificate to observe; at start, files
// that do not load are an error. protos are the ALPN protocols offered (such as "http/1.1").
// With no certFile it returns nil: no TLS, which every method of a nil Certificates serves.
func NewCertificates(certFile, keyFile, clientCAFile string, protos []string, log *slog.Logger, observe func(bool, time.Time)) (*Certificates, error) {
	if certFile == "" {
		return nil, nil
	}
	c := &Certificates{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile, protos: protos, log: log,
		observe: observe}
	files, err := c.read()
	if err != nil {
		return nil, err
	}
	cfg, err := c.build(files)
	if err != nil {
		return nil, err
	}
	c.config.Store(cfg)
	c.files = files
	observe(false, cfg.Certificates[0].Leaf.NotAfter)
	return c, nil
}

// ServerConfig is a listener's TLS configuration: TLS 1.2 at least, and per handshake the
// current certificate (and client CA). On a nil Certificates (no TLS) it is nil.
func (c *Certificates) ServerConfig() *tls.Config {
	if c == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: c.configForClient}
}

// configForClient serves the last good configuration.
func (c *Certificates) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	return c.config.Load(), nil
}

// Run looks at the files again every FileCheckInterval until ctx ends, serving new ones from
// the next handshake if they changed and load; then it returns nil. On a nil Certificates
// (no TLS) it returns nil at once. Start it once, beside the servers.
func (c *Certificates) Run(ctx context.Context) error {
	if c == nil {
		return nil
	}
	return watch(ctx, c.reloadIfChanged)
}

// Reload looks at the files now (SIGHUP), after any look in progress.
func (c *Certificates) Reload() {
	if c != nil {
		c.reloadIfChanged()
	}
}

// reloadIfChanged builds a new configuration if the files changed since last tried. Files
// that become readable again as they were, after a failure to read them, are in force again:
// the failure is over, and the next one is logged.
func (c *Certificates) reloadIfChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	files, err := c.read()
	switch {
	case err != nil && err.Error() == c.readErr: // still unreadable: already said
		return
	case err != nil:
		c.readErr = err.Error()
		c.fail(err)
		return
	}
	unreadable := c.readErr != ""
	c.readErr = ""
	notAfter := c.config.Load().Certificates[0].Leaf.NotAfter
	if files == c.files {
		if unreadable && !c.filesBad {
			c.failing = false
			c.observe(false, notAfter)
			c.log.Info("TLS files readable again, unchanged: their certificate stays in use")
		}
		return
	}
	c.files = files
	cfg, err := c.build(files)
	if c.filesBad = err != nil; c.filesBad {
		c.fail(err)
		return
	}
	c.config.Store(cfg)
	c.failing = false
	notAfter = cfg.Certificates[0].Leaf.NotAfter
	c.observe(false, notAfter)
	c.log.Info("TLS certificate reloaded", "notAfter", notAfter.UTC().Format(time.RFC3339))
}

// fail reports that the files do not load, and logs it once a failure.
func (c *Certificates) fail(err error) {
	if !c.failing {
		c.log.Error("TLS files changed but do not load; still serving the last good certificate", "err", err.Error())
	}
	c.failing = true
	c.observe(true, c.config.Load().Certificates[0].Leaf.NotAfter)
}

// read reads the files, whole.
func (c *Certificates) read() ([3]string, error) {
	var files [3]string
	for i, path := range []string{c.certFile, c.keyFile, c.clientCAFile} {
		if path == "" {
			continue
		}
		b, err := ReadSettingFile(path)
		if err != nil {
			return files, fmt.Errorf("TLS files: %w", err)
		}
		files[i] = string(b)
	}
	return files, nil
}

// build makes a configuration from the files' contents.
func (c *Certificates) build(files [3]string) (*tls.Config, error) {
	cert, err := tls.X509KeyPair([]byte(files[0]), []byte(files[1]))
	if err != nil {
		return nil, fmt.Errorf("BIGSEG_TLS_CERT_FILE/KEY_FILE: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: c.protos}
	if c.clientCAFile != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(files[2])) {
			return nil, errors.New("BIGSEG_TLS_CLIENT_CA_FILE: no PEM certificate in it")
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
