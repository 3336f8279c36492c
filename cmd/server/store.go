package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/memory"
	"github.com/bigseg/bigseg/storage/redis"
)

// openedStore is the configured stores, one an environment, and what the app does with them.
type openedStore struct {
	envs         []segments.Environment                        // each with its Store
	readMetadata func(context.Context) []segments.MetadataRead // every store's, at once; nil: each its own
	name, table  string                                        // "redis", "dynamodb" or "embedded", and DynamoDB's table, as /status shows
	errorCode    func(error) string                            // a bounded code of the store's errors, for logs; nil for none
	poolStats    func() metrics.PoolStats
	reload       func() error // the embedded store only
	close        func()
}

// openStore opens the configured stores; m gets the metrics of their client, tp its spans.
func openStore(ctx context.Context, cfg config, log *slog.Logger, m *metrics.Metrics, tp trace.TracerProvider) (openedStore, error) {
	envs, err := cfg.servedEnvironments()
	if err != nil {
		return openedStore{}, err
	}
	prefixes := make([]string, len(envs))
	for i, e := range envs {
		prefixes[i] = e.Prefix
	}
	switch {
	case cfg.hasDynamoDB():
		return openDynamoDB(ctx, cfg, envs, prefixes, log, m, tp)
	case cfg.hasRedis():
		return openRedis(cfg, envs, prefixes, log, tp)
	}
	store, err := memory.Open(cfg.SeedFile, time.Now)
	if err != nil {
		return openedStore{}, fmt.Errorf("BIGSEG_SEED_FILE: %w", err)
	}
	log.Warn("using the embedded store: it is a fixed snapshot for trying bigseg out, not for production; set BIGSEG_REDIS_URL",
		"store", "embedded", "seedFile", cfg.SeedFile, "contexts", store.Len())
	envs[0].Store = store
	return openedStore{envs: envs, name: "embedded", reload: store.Reload, close: func() {}}, nil
}

// openRedis opens the stores of the environments on one Redis client.
func openRedis(cfg config, envs []segments.Environment, prefixes []string, log *slog.Logger, tp trace.TracerProvider) (openedStore, error) {
	opts, err := cfg.redisOptions()
	if err != nil {
		return openedStore{}, err
	}
	opts.TracerProvider = tp
	client, err := redis.NewClient(opts)
	if err != nil {
		return openedStore{}, fmt.Errorf("%s: %w", opts.URLSettings()[0], err)
	}
	log.Info("using Redis", "store", "redis", "topology", opts.Topology(), "addrs", opts.Addrs(),
		"tls", opts.TLSOn(), "prefixes", prefixes)
	rs := redis.NewStores(client, prefixes...)
	for i := range envs {
		envs[i].Store = rs[i]
	}
	return openedStore{
		envs:         envs,
		readMetadata: func(ctx context.Context) []segments.MetadataRead { return redis.Metadatas(ctx, rs...) },
		name:         "redis",
		poolStats: func() metrics.PoolStats {
			s := client.PoolStats()
			return metrics.PoolStats{Hits: uint64(s.Hits), Misses: uint64(s.Misses), Timeouts: uint64(s.Timeouts),
				TotalConns: uint64(s.TotalConns), IdleConns: uint64(s.IdleConns), Removed: uint64(s.StaleConns)}
		},
		close: func() { client.Close() },
	}, nil
}

// dynamoStatusTimeout bounds a status poll's read of DynamoDB, as Redis's read timeout bounds
// Redis's: a hung read makes the store unavailable after about a second.
const dynamoStatusTimeout = time.Second

// openDynamoDB opens the stores of the environments in the table of BIGSEG_DYNAMODB_TABLE, on
// one client configured by the AWS SDK's own settings, whose requests m counts.
func openDynamoDB(ctx context.Context, cfg config, envs []segments.Environment, prefixes []string, log *slog.Logger, m *metrics.Metrics, tp trace.TracerProvider) (openedStore, error) {
	obs := m.DynamoDB(dynamodb.Operations(), dynamodb.ErrorCodes())
	client, err := dynamodb.NewClient(ctx, dynamodb.ClientOptions{Observer: obs, TracerProvider: tp})
	if err != nil {
		return openedStore{}, fmt.Errorf("BIGSEG_DYNAMODB_TABLE: %w", err)
	}
	log.Info("using DynamoDB", "store", "dynamodb", "table", cfg.DynamoDBTable, "region", client.Region(),
		"endpoint", client.Endpoint(), "consistentRead", cfg.DynamoDBConsistentRead, "prefixes", prefixes)
	ds := dynamodb.NewStores(client, cfg.DynamoDBTable, prefixes, dynamodb.WithConsistentRead(cfg.DynamoDBConsistentRead),
		dynamodb.WithObserver(obs))
	for i := range envs {
		envs[i].Store = ds[i]
	}
	return openedStore{
		envs: envs,
		readMetadata: func(ctx context.Context) []segments.MetadataRead {
			ctx, cancel := context.WithTimeout(ctx, dynamoStatusTimeout)
			defer cancel()
			return dynamodb.Metadatas(ctx, ds...)
		},
		name: "dynamodb", table: cfg.DynamoDBTable, errorCode: dynamodb.ErrorCode, close: client.Close,
	}, nil
}
