package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
	"github.com/bigseg/bigseg/storage/redis"
)

// openedStore is the configured stores, one an environment, and what main must do with them.
type openedStore struct {
	envs         []segments.Environment
	stores       []segments.Store
	readMetadata func(context.Context) []segments.MetadataRead // every store's, at once; nil: each its own
	name         string                                        // "redis", "dynamodb" or "embedded", as /status shows
	table        string                                        // DynamoDB's table, as /status shows
	errorCode    func(error) string                            // a bounded code of the store's errors, for logs; nil for none
	poolStats    func() metrics.PoolStats
	reload       func() error // the embedded store only
	close        func()
}

// respPrefixes are the key prefixes the Redis-protocol listener serves, as its log names them.
func (o openedStore) respPrefixes() string {
	var p []string
	for i := range o.envs {
		p = append(p, o.respPrefix(i))
	}
	return strings.Join(p, ",")
}

// respPrefix is the prefix under which the Redis-protocol listener serves environment i: its
// own, or, for DynamoDB's default of none, the SDKs' default Redis prefix, so that an SDK's
// Redis store reads DynamoDB's data with its defaults.
func (o openedStore) respPrefix(i int) string {
	if p := o.envs[i].Prefix; p != "" {
		return p
	}
	return redis.DefaultPrefix
}

// openStore opens the configured stores; m gets the metrics of the store's client (DynamoDB's
// requests).
// Their clients trace their calls with tp, if set.
func openStore(ctx context.Context, cfg config, log *slog.Logger, m *metrics.Metrics, tp trace.TracerProvider) (openedStore, error) {
	envs, err := cfg.servedEnvironments()
	if err != nil {
		return openedStore{}, err
	}
	switch {
	case cfg.hasDynamoDB():
		return openDynamoDBStore(ctx, cfg, envs, log, m, tp)
	case !cfg.hasRedis():
		return openMemoryStore(cfg, envs, log)
	}
	opts, err := cfg.redisOptions()
	if err != nil {
		return openedStore{}, err
	}
	opts.TracerProvider = tp
	client, err := redis.NewClient(opts)
	if err != nil {
		return openedStore{}, fmt.Errorf("%s: %w", cfg.redisTopologies()[0], err)
	}
	var prefixes []string
	for _, e := range envs {
		prefixes = append(prefixes, e.Prefix)
	}
	log.Info("using Redis", "store", "redis", "topology", opts.Topology(), "addrs", opts.Addrs(),
		"tls", cfg.redisTLS(), "prefixes", prefixes)
	rs := redis.NewStores(client, prefixes...)
	stores := make([]segments.Store, len(rs))
	for i, s := range rs {
		stores[i] = s
	}
	return openedStore{
		envs:         envs,
		stores:       stores,
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
// Redis's: a hung read makes the store unavailable (and /readyz 503) after about a second,
// whatever BIGSEG_LOOKUP_TIMEOUT is.
const dynamoStatusTimeout = time.Second

// The metrics of DynamoDB's requests observe the client and the stores.
var _ dynamodb.Observer = (*metrics.DynamoDB)(nil)

// openDynamoDBStore opens the stores of the environments in the table of
// BIGSEG_DYNAMODB_TABLE, on one client configured by the AWS SDK's own settings, whose
// requests m counts.
func openDynamoDBStore(ctx context.Context, cfg config, envs []segments.Environment, log *slog.Logger, m *metrics.Metrics, tp trace.TracerProvider) (openedStore, error) {
	obs := m.DynamoDB(dynamodb.Operations(), dynamodb.ErrorCodes())
	client, err := dynamodb.NewClient(ctx, dynamodb.ClientOptions{Observer: obs, TracerProvider: tp})
	if err != nil {
		return openedStore{}, fmt.Errorf("BIGSEG_DYNAMODB_TABLE: %w", err)
	}
	prefixes := make([]string, len(envs))
	for i, e := range envs {
		prefixes[i] = e.Prefix
	}
	log.Info("using DynamoDB", "store", "dynamodb", "table", cfg.DynamoDBTable, "region", client.Region(),
		"endpoint", client.Endpoint(), "consistentRead", cfg.DynamoDBConsistentRead, "prefixes", prefixes)
	ds := dynamodb.NewStores(client, cfg.DynamoDBTable, prefixes, dynamodb.WithConsistentRead(cfg.DynamoDBConsistentRead),
		dynamodb.WithObserver(obs))
	stores := make([]segments.Store, len(ds))
	for i, s := range ds {
		stores[i] = s
	}
	return openedStore{
		envs:   envs,
		stores: stores,
		readMetadata: func(ctx context.Context) []segments.MetadataRead {
			ctx, cancel := context.WithTimeout(ctx, dynamoStatusTimeout)
			defer cancel()
			return dynamodb.Metadatas(ctx, ds...)
		},
		name:      "dynamodb",
		table:     cfg.DynamoDBTable,
		errorCode: dynamodb.ErrorCode,
		close:     client.Close,
	}, nil
}

// openMemoryStore opens the embedded store with the fixture of BIGSEG_SEED_FILE, if any.
func openMemoryStore(cfg config, envs []segments.Environment, log *slog.Logger) (openedStore, error) {
	read := func() (*fixture.Fixture, error) {
		if cfg.SeedFile == "" {
			return nil, nil
		}
		f, err := fixture.ReadFile(cfg.SeedFile)
		if err != nil {
			return nil, fmt.Errorf("BIGSEG_SEED_FILE: %w", err)
		}
		return f, nil
	}
	f, err := read()
	if err != nil {
		return openedStore{}, err
	}
	store := memory.New(f, time.Now)
	log.Warn("using the embedded store: it is a fixed snapshot for trying bigseg out, not for production; set BIGSEG_REDIS_URL",
		"store", "embedded", "seedFile", cfg.SeedFile, "contexts", store.Len())
	reload := func() error {
		f, err := read()
		if err == nil {
			store.Replace(f)
		}
		return err
	}
	return openedStore{envs: envs, stores: []segments.Store{store}, name: "embedded", reload: reload, close: func() {}}, nil
}
