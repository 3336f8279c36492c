package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/storage/redis"
)

// hasRedis says whether a Redis is configured (else DynamoDB or the embedded store is used).
func (c config) hasRedis() bool {
	return c.RedisURL != "" || len(c.RedisClusterAddrs) > 0 || len(c.RedisSentinelAddrs) > 0
}

// redisTopologies are the names of the Redis topology settings that are set.
func (c config) redisTopologies() []string {
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
	return set
}

// validateRedis checks the Redis settings; secrets never appear in its messages.
func (c config) validateRedis() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	set := c.redisTopologies()
	if len(set) > 1 {
		bad("%s are set: choose one Redis topology", strings.Join(set, " and "))
	}
	if !c.hasRedis() {
		return append(errs, c.validateNoRedis()...)
	}
	if c.SeedFile != "" {
		bad("BIGSEG_SEED_FILE is for the embedded store, but %s is set", set[0])
	}
	sentinel := len(c.RedisSentinelAddrs) > 0
	if sentinel && c.RedisSentinelMaster == "" {
		bad("BIGSEG_REDIS_SENTINEL_MASTER: required with BIGSEG_REDIS_SENTINEL_ADDRS")
	}
	if !sentinel && c.RedisSentinelMaster != "" {
		bad("BIGSEG_REDIS_SENTINEL_MASTER is set without BIGSEG_REDIS_SENTINEL_ADDRS")
	}
	if c.RedisPassword != "" && c.RedisPasswordFile != "" {
		bad("BIGSEG_REDIS_PASSWORD and BIGSEG_REDIS_PASSWORD_FILE are both set: choose one")
	}
	if c.RedisSentinelPassword != "" && c.RedisSentinelPasswordFile != "" {
		bad("BIGSEG_REDIS_SENTINEL_PASSWORD and BIGSEG_REDIS_SENTINEL_PASSWORD_FILE are both set: choose one")
	}
	if c.RedisURL != "" {
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

// validateNoRedis checks that no Redis setting is given without a Redis.
func (c config) validateNoRedis() []error {
	var errs []error
	if len(c.Environments) > 1 && !c.hasDynamoDB() {
		errs = append(errs, errors.New("BIGSEG_ENVIRONMENTS: the embedded store serves one environment: configure Redis (BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_ADDRS or BIGSEG_REDIS_SENTINEL_ADDRS), or give one environment"))
	}
	for _, v := range []struct {
		name string
		set  bool
	}{ // in a fixed order, so that the joined errors read the same at every start
		{"BIGSEG_REDIS_USERNAME", c.RedisUsername != ""}, {"BIGSEG_REDIS_PASSWORD", c.RedisPassword != ""},
		{"BIGSEG_REDIS_PASSWORD_FILE", c.RedisPasswordFile != ""}, {"BIGSEG_REDIS_TLS", c.RedisTLS},
		{"BIGSEG_REDIS_SENTINEL_MASTER", c.RedisSentinelMaster != ""},
	} {
		if v.set {
			errs = append(errs, fmt.Errorf("%s is set but no Redis is: set BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_ADDRS or BIGSEG_REDIS_SENTINEL_ADDRS", v.name))
		}
	}
	return errs
}

func (c config) validateRedisURL() []error {
	if err := redis.CheckURL(c.RedisURL); err != nil {
		return []error{fmt.Errorf("BIGSEG_REDIS_URL: %w", err)}
	}
	var errs []error
	user, pass := urlUser(c.RedisURL)
	if pass && (c.RedisPassword != "" || c.RedisPasswordFile != "") {
		errs = append(errs, errors.New("BIGSEG_REDIS_URL has a password and BIGSEG_REDIS_PASSWORD(_FILE) is set: choose one"))
	}
	if user && c.RedisUsername != "" {
		errs = append(errs, errors.New("BIGSEG_REDIS_URL has a user name and BIGSEG_REDIS_USERNAME is set: choose one"))
	}
	return errs
}

// urlUser says whether a URL names a user and a password.
func urlUser(rawURL string) (user, pass bool) {
	i := strings.Index(rawURL, "://")
	at := strings.LastIndex(rawURL, "@")
	if i < 0 || at < i {
		return false, false
	}
	u, p, hasPass := strings.Cut(rawURL[i+3:at], ":")
	return u != "", hasPass && p != ""
}

func (c config) validateRedisTLS() []error {
	var errs []error
	if !c.tlsEnabled() {
		for _, v := range [][2]string{ // in a fixed order, as above
			{"BIGSEG_REDIS_TLS_CA_FILE", c.RedisTLSCAFile}, {"BIGSEG_REDIS_TLS_CERT_FILE", c.RedisTLSCertFile},
			{"BIGSEG_REDIS_TLS_KEY_FILE", c.RedisTLSKeyFile}, {"BIGSEG_REDIS_TLS_SERVER_NAME", c.RedisTLSServerName},
		} {
			if v[1] != "" {
				errs = append(errs, fmt.Errorf("%s is set but TLS is off: use rediss:// or BIGSEG_REDIS_TLS=true", v[0]))
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

// redisTLSConfig builds the TLS settings for Redis; nil when TLS is off.
func (c config) redisTLSConfig() (*tls.Config, error) {
	if !c.tlsEnabled() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.RedisTLSServerName, InsecureSkipVerify: c.RedisTLSInsecureSkipVerify}
	if c.RedisTLSCAFile != "" {
		pem, err := auth.ReadSettingFile(c.RedisTLSCAFile)
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
	b, err := auth.ReadSettingFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fileVar, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// redisOptions are the Redis client's options, secrets and certificates read from their files.
func (c config) redisOptions() (o redis.ClientOptions, err error) {
	o = redis.ClientOptions{URL: c.RedisURL, ClusterAddrs: c.RedisClusterAddrs, SentinelAddrs: c.RedisSentinelAddrs,
		SentinelMaster: c.RedisSentinelMaster, Username: c.RedisUsername, DB: c.RedisDB,
		DialTimeout: c.RedisDialTimeout, ReadTimeout: c.RedisReadTimeout, WriteTimeout: c.RedisWriteTimeout,
		MaxRetries: c.RedisMaxRetries, PoolSize: c.RedisPoolSize}
	if o.Password, err = secret(c.RedisPassword, c.RedisPasswordFile, "BIGSEG_REDIS_PASSWORD_FILE"); err != nil {
		return o, err
	}
	if o.SentinelPassword, err = secret(c.RedisSentinelPassword, c.RedisSentinelPasswordFile, "BIGSEG_REDIS_SENTINEL_PASSWORD_FILE"); err != nil {
		return o, err
	}
	o.TLS, err = c.redisTLSConfig()
	return o, err
}
