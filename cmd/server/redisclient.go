package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Redis topologies, one of which a configuration selects.
const (
	topologyNone       = ""
	topologyStandalone = "standalone"
	topologyCluster    = "cluster"
	topologySentinel   = "sentinel"
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
	if c.RedisURL != "" {
		set = append(set, "BIGSEG_REDIS_URL")
	}
	if len(c.RedisClusterAddrs) > 0 {
		set = append(set, "BIGSEG_REDIS_CLUSTER_ADDRS")
	}
	if len(c.RedisSentinelAddrs) > 0 {
		set = append(set, "BIGSEG_REDIS_SENTINEL_ADDRS")
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
	if topo == topologyStandalone {
		u, err := url.Parse(c.RedisURL)
		if err != nil {
			bad("BIGSEG_REDIS_URL: not a URL")
		} else {
			if _, err := goredis.ParseURL(c.RedisURL); err != nil {
				bad("BIGSEG_REDIS_URL: %v", redactURLError(err, c.RedisURL))
			}
			if _, has := u.User.Password(); has && (c.RedisPassword != "" || c.RedisPasswordFile != "") {
				bad("BIGSEG_REDIS_URL has a password and BIGSEG_REDIS_PASSWORD(_FILE) is set: choose one")
			}
			if u.User.Username() != "" && c.RedisUsername != "" {
				bad("BIGSEG_REDIS_URL has a user name and BIGSEG_REDIS_USERNAME is set: choose one")
			}
		}
	}
	for _, addrs := range [][]string{c.RedisClusterAddrs, c.RedisSentinelAddrs} {
		for _, a := range addrs {
			if !strings.Contains(a, ":") || strings.Contains(a, "/") {
				bad("Redis address %q is not host:port", a)
			}
		}
	}
	if !c.tlsEnabled() {
		for name, v := range map[string]string{
			"BIGSEG_REDIS_TLS_CA_FILE": c.RedisTLSCAFile, "BIGSEG_REDIS_TLS_CERT_FILE": c.RedisTLSCertFile,
			"BIGSEG_REDIS_TLS_KEY_FILE": c.RedisTLSKeyFile, "BIGSEG_REDIS_TLS_SERVER_NAME": c.RedisTLSServerName,
		} {
			if v != "" {
				bad("%s is set but TLS is off: use rediss:// or BIGSEG_REDIS_TLS=true", name)
			}
		}
		if c.RedisTLSInsecureSkipVerify {
			bad("BIGSEG_REDIS_TLS_INSECURE_SKIP_VERIFY is set but TLS is off")
		}
	}
	if (c.RedisTLSCertFile == "") != (c.RedisTLSKeyFile == "") {
		bad("BIGSEG_REDIS_TLS_CERT_FILE and BIGSEG_REDIS_TLS_KEY_FILE go together")
	}
	return errs
}

func (c config) tlsEnabled() bool {
	return c.RedisTLS || strings.HasPrefix(c.RedisURL, "rediss://")
}

// tlsConfig builds the TLS settings; nil when TLS is off.
func (c config) tlsConfig(host string) (*tls.Config, error) {
	if !c.tlsEnabled() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host, InsecureSkipVerify: c.RedisTLSInsecureSkipVerify}
	if c.RedisTLSServerName != "" {
		tc.ServerName = c.RedisTLSServerName
	}
	if c.RedisTLSCAFile != "" {
		pem, err := os.ReadFile(c.RedisTLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("BIGSEG_REDIS_TLS_CA_FILE: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("BIGSEG_REDIS_TLS_CA_FILE: no PEM certificate in it")
		}
	}
	if c.RedisTLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.RedisTLSCertFile, c.RedisTLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("BIGSEG_REDIS_TLS_CERT_FILE/KEY_FILE: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// password returns the configured password (from the environment or its file), "" if none.
func (c config) password() (string, error) {
	if c.RedisPasswordFile == "" {
		return c.RedisPassword, nil
	}
	b, err := os.ReadFile(c.RedisPasswordFile)
	if err != nil {
		return "", fmt.Errorf("BIGSEG_REDIS_PASSWORD_FILE: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// redisTarget describes a client for logs: topology and addresses, never credentials.
type redisTarget struct {
	topology string
	addrs    []string
	tls      bool
}

// newRedisClient makes the client the configuration selects.
func newRedisClient(c config) (goredis.UniversalClient, redisTarget, error) {
	password, err := c.password()
	if err != nil {
		return nil, redisTarget{}, err
	}
	target := redisTarget{topology: c.topology(), tls: c.tlsEnabled()}
	switch target.topology {
	case topologyStandalone:
		opts, err := goredis.ParseURL(c.RedisURL)
		if err != nil {
			return nil, target, fmt.Errorf("BIGSEG_REDIS_URL: %w", redactURLError(err, c.RedisURL))
		}
		if c.RedisUsername != "" {
			opts.Username = c.RedisUsername
		}
		if password != "" {
			opts.Password = password
		}
		if opts.DB == 0 {
			opts.DB = c.RedisDB
		}
		if c.tlsEnabled() {
			host := opts.Addr
			if h, _, ok := strings.Cut(opts.Addr, ":"); ok {
				host = h
			}
			if opts.TLSConfig, err = c.tlsConfig(host); err != nil {
				return nil, target, err
			}
		}
		c.applyClientSettings(&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout, &opts.MaxRetries, &opts.PoolSize, &opts.Protocol)
		target.addrs = []string{opts.Addr}
		return goredis.NewClient(opts), target, nil
	case topologyCluster:
		tc, err := c.tlsConfig("")
		if err != nil {
			return nil, target, err
		}
		opts := &goredis.ClusterOptions{Addrs: c.RedisClusterAddrs, Username: c.RedisUsername, Password: password, TLSConfig: tc}
		c.applyClientSettings(&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout, &opts.MaxRetries, &opts.PoolSize, &opts.Protocol)
		target.addrs = c.RedisClusterAddrs
		return goredis.NewClusterClient(opts), target, nil
	case topologySentinel:
		tc, err := c.tlsConfig("")
		if err != nil {
			return nil, target, err
		}
		opts := &goredis.FailoverOptions{
			MasterName: c.RedisSentinelMaster, SentinelAddrs: c.RedisSentinelAddrs, SentinelPassword: c.RedisSentinelPassword,
			Username: c.RedisUsername, Password: password, DB: c.RedisDB, TLSConfig: tc,
		}
		c.applyClientSettings(&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout, &opts.MaxRetries, &opts.PoolSize, &opts.Protocol)
		target.addrs = c.RedisSentinelAddrs
		return goredis.NewFailoverClient(opts), target, nil
	}
	return nil, target, errors.New("no Redis configured")
}

// applyClientSettings sets what every topology shares: timeouts, retries, pool size, and
// RESP2. bigseg needs nothing of RESP3, and go-redis checks for RESP3 push notifications
// around every read, which cost about 7% of CPU in the cold benchmark.
func (c config) applyClientSettings(dial, read, write *time.Duration, retries, pool, protocol *int) {
	*dial, *read, *write = c.RedisDialTimeout, c.RedisReadTimeout, c.RedisWriteTimeout
	*retries, *pool = c.RedisMaxRetries, c.RedisPoolSize
	if c.RedisMaxRetries == 0 {
		*retries = -1 // go-redis reads 0 as "its default, 3"; -1 is none
	}
	*protocol = 2
}
