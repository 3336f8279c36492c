package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/redis"
)

// hasRedis says whether a Redis is configured (else DynamoDB or the embedded store is used).
func (c config) hasRedis() bool { return len(c.redisTopologies()) > 0 }

// redisTopologies are the names of the Redis URL settings that are set.
func (c config) redisTopologies() []string {
	var set []string
	for _, v := range [][2]string{{"BIGSEG_REDIS_URL", c.RedisURL}, {"BIGSEG_REDIS_CLUSTER_URL", c.RedisClusterURL},
		{"BIGSEG_REDIS_SENTINEL_URL", c.RedisSentinelURL}} {
		if v[1] != "" {
			set = append(set, v[0])
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
	if len(set) == 0 {
		if len(c.Environments) > 1 && !c.hasDynamoDB() {
			bad("BIGSEG_ENVIRONMENTS: the embedded store serves one environment: configure Redis (BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_URL or BIGSEG_REDIS_SENTINEL_URL), or give one environment")
		}
		for _, v := range [][2]string{ // in a fixed order, so that the joined errors read the same at every start
			{"BIGSEG_REDIS_PASSWORD_FILE", c.RedisPasswordFile}, {"BIGSEG_REDIS_SENTINEL_PASSWORD_FILE", c.RedisSentinelPasswordFile},
			{"BIGSEG_REDIS_TLS_CA_FILE", c.RedisTLSCAFile}, {"BIGSEG_REDIS_TLS_CERT_FILE", c.RedisTLSCertFile},
			{"BIGSEG_REDIS_TLS_KEY_FILE", c.RedisTLSKeyFile}, {"BIGSEG_REDIS_TLS_SERVER_NAME", c.RedisTLSServerName},
		} {
			if v[1] != "" {
				bad("%s is set but no Redis is: set BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_URL or BIGSEG_REDIS_SENTINEL_URL", v[0])
			}
		}
		return errs
	}
	if c.SeedFile != "" {
		bad("BIGSEG_SEED_FILE is for the embedded store, but %s is set", set[0])
	}
	o := c.redisURLs()
	if err := o.CheckURL(); err != nil {
		return append(errs, fmt.Errorf("%s: %w", set[0], err))
	}
	pass, sentinelPass := o.URLCredentials()
	if pass && c.RedisPasswordFile != "" {
		bad("%s has a password and BIGSEG_REDIS_PASSWORD_FILE is set: choose one", set[0])
	}
	if sentinelPass && c.RedisSentinelPasswordFile != "" {
		bad("BIGSEG_REDIS_SENTINEL_URL has the sentinels' password and BIGSEG_REDIS_SENTINEL_PASSWORD_FILE is set: choose one")
	}
	if c.RedisSentinelPasswordFile != "" && c.RedisSentinelURL == "" {
		bad("BIGSEG_REDIS_SENTINEL_PASSWORD_FILE is set without BIGSEG_REDIS_SENTINEL_URL")
	}
	if !c.redisTLS() {
		for _, v := range [][2]string{ // in a fixed order, as above
			{"BIGSEG_REDIS_TLS_CA_FILE", c.RedisTLSCAFile}, {"BIGSEG_REDIS_TLS_CERT_FILE", c.RedisTLSCertFile},
			{"BIGSEG_REDIS_TLS_KEY_FILE", c.RedisTLSKeyFile}, {"BIGSEG_REDIS_TLS_SERVER_NAME", c.RedisTLSServerName},
		} {
			if v[1] != "" {
				bad("%s is set but TLS is off: use a rediss:// URL", v[0])
			}
		}
	}
	if (c.RedisTLSCertFile == "") != (c.RedisTLSKeyFile == "") {
		bad("BIGSEG_REDIS_TLS_CERT_FILE and BIGSEG_REDIS_TLS_KEY_FILE go together")
	}
	return errs
}

// redisTLS says whether the Redis URL is rediss://: TLS.
func (c config) redisTLS() bool {
	return strings.HasPrefix(c.RedisURL+c.RedisClusterURL+c.RedisSentinelURL, "rediss://")
}

// redisURLs are the Redis client's options that the URL settings give.
func (c config) redisURLs() redis.ClientOptions {
	return redis.ClientOptions{URL: c.RedisURL, ClusterURL: c.RedisClusterURL, SentinelURL: c.RedisSentinelURL}
}

// redisOptions are the Redis client's options, secrets and certificates read from their files.
func (c config) redisOptions() (o redis.ClientOptions, err error) {
	o = c.redisURLs()
	if o.Password, err = redis.ReadSecret(c.RedisPasswordFile); err != nil {
		return o, fmt.Errorf("BIGSEG_REDIS_PASSWORD_FILE: %w", err)
	}
	if o.SentinelPassword, err = redis.ReadSecret(c.RedisSentinelPasswordFile); err != nil {
		return o, fmt.Errorf("BIGSEG_REDIS_SENTINEL_PASSWORD_FILE: %w", err)
	}
	if o.TLS, err = redis.TLSFiles(c.RedisTLSCAFile, c.RedisTLSCertFile, c.RedisTLSKeyFile, c.RedisTLSServerName); err != nil {
		return o, fmt.Errorf("BIGSEG_REDIS_TLS_CA_FILE, _CERT_FILE or _KEY_FILE: %w", err)
	}
	return o, nil
}

// hasDynamoDB says whether a DynamoDB table is configured (instead of Redis).
func (c config) hasDynamoDB() bool { return c.DynamoDBTable != "" }

// validateDynamoDB checks the DynamoDB settings. Where to connect, and as whom, are the AWS
// SDK's own settings (AWS_*), which bigseg does not repeat.
func (c config) validateDynamoDB() []error {
	var errs []error
	if !c.hasDynamoDB() {
		if !c.DynamoDBConsistentRead {
			errs = append(errs, errors.New("BIGSEG_DYNAMODB_CONSISTENT_READ is set but no DynamoDB table is: set BIGSEG_DYNAMODB_TABLE"))
		}
		return errs
	}
	if !dynamodb.IsTableName(c.DynamoDBTable) {
		errs = append(errs, fmt.Errorf("BIGSEG_DYNAMODB_TABLE: %.80q is not a table name (3 to 255 of A-Z, a-z, 0-9, _ - .) or a table's ARN", c.DynamoDBTable))
	}
	for _, name := range c.redisTopologies() {
		errs = append(errs, fmt.Errorf("BIGSEG_DYNAMODB_TABLE and %s are both set: choose one store", name))
	}
	if c.SeedFile != "" {
		errs = append(errs, errors.New("BIGSEG_SEED_FILE is for the embedded store, but BIGSEG_DYNAMODB_TABLE is set"))
	}
	return errs
}
