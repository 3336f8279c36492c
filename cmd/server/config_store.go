package main

import (
	"errors"
	"fmt"

	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/redis"
)

// hasRedis says whether a Redis is configured (else DynamoDB or the embedded store is used).
func (c config) hasRedis() bool { return len(c.redisURLs().URLSettings()) > 0 }

// hasDynamoDB says whether a DynamoDB table is configured (instead of Redis).
func (c config) hasDynamoDB() bool { return c.DynamoDBTable != "" }

// redisURLs are the Redis client's options that the URL settings give.
func (c config) redisURLs() redis.ClientOptions {
	return redis.ClientOptions{URL: c.RedisURL, ClusterURL: c.RedisClusterURL, SentinelURL: c.RedisSentinelURL}
}

func (c config) redisFiles() redis.Files {
	return redis.Files{Password: c.RedisPasswordFile, SentinelPassword: c.RedisSentinelPasswordFile,
		TLSCA: c.RedisTLSCAFile, TLSCert: c.RedisTLSCertFile, TLSKey: c.RedisTLSKeyFile, TLSServerName: c.RedisTLSServerName,
		Read: auth.ReadSettingFile}
}

// redisOptions are the Redis client's options, secrets and certificates read from their files.
func (c config) redisOptions() (redis.ClientOptions, error) {
	return c.redisURLs().WithFiles(c.redisFiles())
}

// validateStores checks that one store is configured, and each store's settings. Where to
// connect to DynamoDB, and as whom, are the AWS SDK's own settings (AWS_*), which bigseg does
// not repeat.
func (c config) validateStores() []error {
	errs := c.redisURLs().Check(c.redisFiles())
	stores := c.redisURLs().URLSettings()
	if c.hasDynamoDB() {
		if !dynamodb.IsTableName(c.DynamoDBTable) {
			errs = append(errs, fmt.Errorf("BIGSEG_DYNAMODB_TABLE: %.80q is not a table name (3 to 255 of A-Z, a-z, 0-9, _ - .) or a table's ARN", c.DynamoDBTable))
		}
		for _, name := range stores {
			errs = append(errs, fmt.Errorf("BIGSEG_DYNAMODB_TABLE and %s are both set: choose one store", name))
		}
		stores = append([]string{"BIGSEG_DYNAMODB_TABLE"}, stores...)
	} else if !c.DynamoDBConsistentRead {
		errs = append(errs, errors.New("BIGSEG_DYNAMODB_CONSISTENT_READ is set but no DynamoDB table is: set BIGSEG_DYNAMODB_TABLE"))
	}
	if c.SeedFile != "" && len(stores) > 0 {
		errs = append(errs, fmt.Errorf("BIGSEG_SEED_FILE is for the embedded store, but %s is set", stores[0]))
	}
	if len(c.Environments) > 1 && len(stores) == 0 {
		errs = append(errs, errors.New("BIGSEG_ENVIRONMENTS: the embedded store serves one environment: configure Redis (BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_URL or BIGSEG_REDIS_SENTINEL_URL), or give one environment"))
	}
	return errs
}
