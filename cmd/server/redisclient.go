package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/guard"
)

// Redis topologies, one of which a configuration selects.
const (
	topologyNone       = ""
	topologyStandalone = "standalone"
	topologyCluster    = "cluster"
	topologySentinel   = "sentinel"
)

// Retry backoff between a failed Redis call and its retry (BIGSEG_REDIS_MAX_RETRIES): short,
// since the lookup timeout bounds the whole lookup anyway.
const (
	redisMinRetryBackoff = 8 * time.Millisecond
	redisMaxRetryBackoff = 100 * time.Millisecond
)

// topology returns the Redis topology the configuration selects ("" for the embedded store).
func (c config) topology() string {
	switch {
	case c.RedisURL != "":
		return topologyStandalone
	case len(c.RedisClusterAddrs) > 0:
		return topologyCluster
	case len(c.RedisSentinelAddrs) > 0:
		return topologySentinel
	}
	return topologyNone
}

// validateRedis checks the Redis settings; secrets never appear in its messages.
func (c config) validateRedis() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var set []string
	for _, v := range []struct {
		name string
		on   bool
	}{{"BIGSEG_REDIS_URL", c.RedisURL != ""}, {"BIGSEG_REDIS_CLUSTER_ADDRS", len(c.RedisClusterAddrs) > 0},
		{"BIGSEG_REDIS_SENTINEL_ADDRS", len(c.RedisSentinelAddrs) > 0}} {
		if v.on {
			set = append(set, v.name)
		}
	}
	if len(set) > 1 {
		bad("%s are set: choose one Redis topology", strings.Join(set, " and "))
	}
	topo := c.topology()
	if topo == topologyNone {
		for name, v := range map[string]bool{
			"BIGSEG_REDIS_USERNAME": c.RedisUsername != "", "BIGSEG_REDIS_PASSWORD": c.RedisPassword != "",
			"BIGSEG_REDIS_PASSWORD_FILE": c.RedisPasswordFile != "", "BIGSEG_REDIS_TLS": c.RedisTLS,
			"BIGSEG_REDIS_SENTINEL_MASTER": c.RedisSentinelMaster != "",
		} {
			if v {
				bad("%s is set but no Redis is: set BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_ADDRS or BIGSEG_REDIS_SENTINEL_ADDRS", name)
			}
		}
		return errs
	}
	if c.SeedFile != "" {
		bad("BIGSEG_SEED_FILE is for the embedded store, but %s is set", set[0])
	}
	if topo == topologySentinel && c.RedisSentinelMaster == "" {
		bad("BIGSEG_REDIS_SENTINEL_MASTER: required with BIGSEG_REDIS_SENTINEL_ADDRS")
	}
	if topo != topologySentinel && c.RedisSentinelMaster != "" {
		bad("BIGSEG_REDIS_SENTINEL_MASTER is set without BIGSEG_REDIS_SENTINEL_ADDRS")
	}
	if c.RedisPassword != "" && c.RedisPasswordFile != "" {
		bad("BIGSEG_REDIS_PASSWORD and BIGSEG_REDIS_PASSWORD_FILE are both set: choose one")
	}
	if c.RedisSentinelPassword != "" && c.RedisSentinelPasswordFile != "" {
		bad("BIGSEG_REDIS_SENTINEL_PASSWORD and BIGSEG_REDIS_SENTINEL_PASSWORD_FILE are both set: choose one")
	}
	if topo == topologyStandalone {
		errs = append(errs, c.validateRedisURL()...)
	}
	for _, addrs := range [][]string{c.RedisClusterAddrs, c.RedisSentinelAddrs} {
		for _, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil || strings.Contains(a, "/") {
				bad("Redis address %q is not host:port", a)
			}
		}
	}
	return append(errs, c.validateRedisTLS()...)
}

func (c config) validateRedisURL() []error {
	var errs []error
	u, err := url.Parse(c.RedisURL)
	if err != nil {
		return []error{errors.New("BIGSEG_REDIS_URL: not a URL")}
	}
	if _, err := goredis.ParseURL(c.RedisURL); err != nil {
		errs = append(errs, fmt.Errorf("BIGSEG_REDIS_URL: %v", redactURLError(err, c.RedisURL)))
	}
	if _, has := u.User.Password(); has && (c.RedisPassword != "" || c.RedisPasswordFile != "") {
		errs = append(errs, errors.New("BIGSEG_REDIS_URL has a password and BIGSEG_REDIS_PASSWORD(_FILE) is set: choose one"))
	}
	if u.User.Username() != "" && c.RedisUsername != "" {
		errs = append(errs, errors.New("BIGSEG_REDIS_URL has a user name and BIGSEG_REDIS_USERNAME is set: choose one"))
	}
	return errs
}

func (c config) validateRedisTLS() []error {
	var errs []error
	if !c.tlsEnabled() {
		for name, v := range map[string]string{
			"BIGSEG_REDIS_TLS_CA_FILE": c.RedisTLSCAFile, "BIGSEG_REDIS_TLS_CERT_FILE": c.RedisTLSCertFile,
			"BIGSEG_REDIS_TLS_KEY_FILE": c.RedisTLSKeyFile, "BIGSEG_REDIS_TLS_SERVER_NAME": c.RedisTLSServerName,
		} {
			if v != "" {
				errs = append(errs, fmt.Errorf("%s is set but TLS is off: use rediss:// or BIGSEG_REDIS_TLS=true", name))
			}
		}
		if c.RedisTLSInsecureSkipVerify {
			errs = append(errs, errors.New("BIGSEG_REDIS_TLS_INSECURE_SKIP_VERIFY is set but TLS is off"))
		}
	}
	if (c.RedisTLSCertFile == "") != (c.RedisTLSKeyFile == "") {
		errs = append(errs, errors.New("BIGSEG_REDIS_TLS_CERT_FILE and BIGSEG_REDIS_TLS_KEY_FILE go together"))
	}
	return errs
}

func (c config) tlsEnabled() bool {
	return c.RedisTLS || strings.HasPrefix(c.RedisURL, "rediss://")
}

// redisTLSConfig builds the TLS settings for Redis; nil when TLS is off. serverName is the
// name to verify when BIGSEG_REDIS_TLS_SERVER_NAME does not give one; empty, it is the host of
// each address dialled.
func (c config) redisTLSConfig(serverName string) (*tls.Config, error) {
	if !c.tlsEnabled() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, InsecureSkipVerify: c.RedisTLSInsecureSkipVerify}
	if c.RedisTLSServerName != "" {
		tc.ServerName = c.RedisTLSServerName
	}
	if c.RedisTLSCAFile != "" {
		pem, err := guard.ReadSettingFile(c.RedisTLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("BIGSEG_REDIS_TLS_CA_FILE: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("BIGSEG_REDIS_TLS_CA_FILE: no PEM certificate in it")
		}
	}
	if c.RedisTLSCertFile != "" {
		cert, err := loadKeyPair(c.RedisTLSCertFile, c.RedisTLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("BIGSEG_REDIS_TLS_CERT_FILE/KEY_FILE: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// secret returns a secret given directly or in a file (a mounted Kubernetes secret: one
// trailing newline is not part of it), "" if neither is set.
func secret(value, file, fileVar string) (string, error) {
	if file == "" {
		return value, nil
	}
	b, err := guard.ReadSettingFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fileVar, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// redisTarget describes a client for logs: topology and addresses, never credentials.
type redisTarget struct {
	topology string
	addrs    []string
	tls      bool
}

// redisOptions builds the client options of every topology as one UniversalOptions.
func (c config) redisOptions() (*goredis.UniversalOptions, error) {
	password, err := secret(c.RedisPassword, c.RedisPasswordFile, "BIGSEG_REDIS_PASSWORD_FILE")
	if err != nil {
		return nil, err
	}
	sentinelPassword, err := secret(c.RedisSentinelPassword, c.RedisSentinelPasswordFile, "BIGSEG_REDIS_SENTINEL_PASSWORD_FILE")
	if err != nil {
		return nil, err
	}
	o := &goredis.UniversalOptions{
		Username: c.RedisUsername, Password: password, DB: c.RedisDB, SentinelPassword: sentinelPassword,
		DialTimeout: c.RedisDialTimeout, ReadTimeout: c.RedisReadTimeout, WriteTimeout: c.RedisWriteTimeout,
		MaxRetries: c.RedisMaxRetries, MinRetryBackoff: redisMinRetryBackoff, MaxRetryBackoff: redisMaxRetryBackoff,
		PoolSize: c.RedisPoolSize,
		// One dial attempt per connection: go-redis would otherwise retry a refused dial 5
		// times with backoffs, inside every lookup.
		DialerRetries: 1,
		// Socket deadlines follow a call's context too, not only the read and write timeouts:
		// so the lookup timeout bounds a read in progress, and a batch never succeeds late.
		ContextTimeoutEnabled: true,
		// RESP2: bigseg needs nothing of RESP3, and go-redis checks for RESP3 push
		// notifications around every read (7% of CPU in the cold benchmark).
		Protocol: 2,
	}
	if c.RedisMaxRetries == 0 {
		o.MaxRetries = -1 // go-redis reads 0 as "its default, 3"; -1 is none
	}
	serverName := ""
	switch c.topology() {
	case topologyStandalone:
		if serverName, err = c.standaloneOptions(o); err != nil {
			return nil, err
		}
	case topologyCluster:
		o.Addrs, o.IsClusterMode = c.RedisClusterAddrs, true
	case topologySentinel:
		o.Addrs, o.MasterName = c.RedisSentinelAddrs, c.RedisSentinelMaster
	}
	o.TLSConfig, err = c.redisTLSConfig(serverName)
	return o, err
}

// standaloneOptions sets what BIGSEG_REDIS_URL says; the settings of their own win over the
// URL's only where the URL is silent. It returns the host to verify a TLS certificate against.
func (c config) standaloneOptions(o *goredis.UniversalOptions) (string, error) {
	u, err := goredis.ParseURL(c.RedisURL)
	if err != nil {
		return "", fmt.Errorf("BIGSEG_REDIS_URL: %w", redactURLError(err, c.RedisURL))
	}
	o.Addrs = []string{u.Addr}
	if u.Username != "" {
		o.Username = u.Username
	}
	if u.Password != "" {
		o.Password = u.Password
	}
	if u.DB != 0 {
		o.DB = u.DB
	}
	if u.Network == "unix" {
		o.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: c.RedisDialTimeout}
			return d.DialContext(ctx, "unix", addr)
		}
		return "", nil
	}
	host, _, err := net.SplitHostPort(u.Addr) // not a split on the first ':': IPv6
	if err != nil {
		return "", fmt.Errorf("BIGSEG_REDIS_URL: %w", redactURLError(err, c.RedisURL))
	}
	return host, nil
}

// newRedisClient makes the client the configuration selects.
func newRedisClient(c config) (goredis.UniversalClient, redisTarget, error) {
	o, err := c.redisOptions()
	if err != nil {
		return nil, redisTarget{}, err
	}
	return goredis.NewUniversalClient(o), redisTarget{topology: c.topology(), addrs: o.Addrs, tls: o.TLSConfig != nil}, nil
}
