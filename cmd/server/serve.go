package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/internal/inventory"
	"github.com/bigseg/bigseg/internal/limit"
	"github.com/bigseg/bigseg/internal/shutdown"
	"github.com/bigseg/bigseg/internal/telemetry"
	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/resp"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/memory"
	"github.com/bigseg/bigseg/storage/redis"
)

// app is the service's parts, built by newApp; it owns every resource they hold.
type app struct {
	cfg               config
	log               *slog.Logger
	store             openedStore
	svc               *segments.Service
	srv               *http.Server         // the API's
	ops               *http.Server         // the operators' listener's (metrics, probes, pprof), when configured
	resp              *resp.Server         // the Redis-protocol listener's, when configured
	ln, opsLn, respLn *limit.Listener      // their listeners, each under its connection limit
	certs             *auth.Certificates   // the listeners' TLS files, when configured
	tokens            *auth.Tokens         // the bearer tokens accepted, if any
	tel               *telemetry.Telemetry // OpenTelemetry, as the OTEL_* variables set it up
	inv               *inventory.Loop      // the store inventory's scans
	stop              chan struct{}        // closed when the server shuts down: status streams end
}

// newApp opens the store and the listeners and wires the service, its metrics and its
// servers. Nothing runs yet.
func newApp(ctx context.Context, cfg config, log *slog.Logger) (_ *app, err error) {
	a := &app{cfg: cfg, log: log, stop: make(chan struct{})}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	m.BuildInfo(version(), runtime.Version())
	if a.tel, err = telemetry.Setup(ctx, telemetry.Options{Log: log, Registry: reg, Version: version()}); err != nil {
		return nil, err
	}
	if a.store, err = openStore(ctx, cfg, log, m, telemetry.ChildrenOnly(a.tel.TracerProvider)); err != nil {
		return nil, err
	}
	if err := a.service(m); err != nil {
		return nil, err
	}
	m.WatchReady(func() bool { ready, _ := a.svc.Readiness(); return ready })
	a.inv = inventory.New(a.svc.Environments(), inventory.Settings{Interval: cfg.InventoryInterval, ReadsPerSecond: cfg.InventoryReadsPerSecond},
		log, m.Inventory(cfg.InventoryInterval, cfg.InventoryMaxSegments))
	if a.certs, err = auth.NewCertificates(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile, []string{"http/1.1"}, log, m.TLSCertificate); err != nil {
		return nil, err
	}
	names := segments.Names(a.svc.Environments())
	if a.tokens, err = auth.NewTokens(cfg.APITokens, cfg.APITokensFile, log, m.APITokensFile, names...); err != nil {
		return nil, err
	}
	if a.ln, err = listen("API", cfg.Addr, cfg.MaxConns); err != nil {
		return nil, err
	}
	if a.opsLn, err = listen("metrics", cfg.MetricsAddr, sideConns); err != nil {
		return nil, err
	}
	if a.respLn, err = listen("Redis-protocol", cfg.RESPAddr, cfg.RESPMaxConns); err != nil {
		return nil, err
	}
	a.servers(m, reg, handlers.Scope(names...))
	return a, nil
}

// sideConns bounds the connections of the operators' listener: scrapers, probes and
// profilers need few.
const sideConns = 64

// listen opens a listener under a connection limit of its own; none (nil) if addr is unset.
func listen(name, addr string, maxConns int) (*limit.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	return limit.NewListener(ln, maxConns), nil
}

// servers makes what serves each listener: the HTTP API, the operators' HTTP server and the
// Redis-protocol one, both of these only for their listener; scope is the environment a
// request is about, for the token check.
func (a *app) servers(m *metrics.Metrics, reg *prometheus.Registry, scope func(*http.Request) string) {
	m.WatchConnections(a.ln.Open)
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelError),
		MaxRequestsInFlight: 4}) // each scrape renders every metric: beyond 4 at once, 503
	if a.opsLn != nil {
		a.ops = a.opsServer(metricsHandler)
		metricsHandler = nil // served on the operators' listener only
	}
	a.srv = a.apiServer(m, metricsHandler, scope)
	a.srv.RegisterOnShutdown(func() { close(a.stop) })
	if a.respLn != nil {
		a.resp = resp.New(resp.Config{
			Version: version(), Log: a.log, Tokens: a.tokens, Listener: a.respLn, TLSConfig: a.certs.ServerConfig(),
			IdleTimeout: a.cfg.RESPIdleTimeout, ReadTimeout: a.cfg.RESPReadTimeout,
			Observe: m.RESP(resp.Commands(), a.respLn.Open), TracerProvider: a.tel.TracerProvider,
		}, a.svc.Environments()...)
	}
}

// apiServer is the HTTP API's server, with the defences where they belong: on each kind of
// route, the token check first (strangers use no capacity), then a batch's body read within
// the memory budget; a stream's own slots.
func (a *app) apiServer(m *metrics.Metrics, metricsHandler http.Handler, scope func(*http.Request) string) *http.Server {
	tokens := a.tokens.Require(handlers.Error, scope)
	bodies := limit.NewBodies(a.cfg.BodyMemoryBytes).Limit(a.cfg.MaxBodyBytes, a.cfg.BodyReadTimeout, handlers.BatchUses(a.cfg.MaxBatch), handlers.Error)
	return &http.Server{
		Handler: handlers.New(handlers.Config{
			Log: a.log, StoreName: a.store.name, StoreTable: a.store.table, Version: version(),
			MaxKeyBytes: a.cfg.MaxKeyBytes, MaxBatch: a.cfg.MaxBatch, MaxBatchRefs: a.cfg.MaxBatchRefs,
			MaxBodyBytes: a.cfg.MaxBodyBytes, Stop: a.stop, Observe: m.ObserveRequest, Metrics: metricsHandler,
			Lookups: tokens, Batches: chi.Chain(tokens, bodies).Handler, Views: tokens,
			Streams:    chi.Chain(tokens, limit.Streams(a.ln.MaxStreams(a.cfg.MaxStreams), handlers.Error)).Handler,
			Authorized: a.tokens.Authorizes, Trace: a.tel.HTTP(),
		}, a.svc),
		ReadHeaderTimeout: a.cfg.ReadHeaderTimeout, ReadTimeout: a.cfg.ReadTimeout, WriteTimeout: a.cfg.WriteTimeout,
		IdleTimeout: a.cfg.IdleTimeout, MaxHeaderBytes: a.cfg.MaxHeaderBytes, Protocols: http1Only(),
		ConnState: a.ln.ConnState, ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
		TLSConfig: a.certs.ServerConfig(),
	}
}

// opsServer is the operators' listener's server: /metrics, the probes and Go's /debug/pprof.
// It answers little and to few (sideConns), with short timeouts, but for writes as long as a
// profile (pprof's default 30 s).
func (a *app) opsServer(metricsHandler http.Handler) *http.Server {
	srv := &http.Server{Handler: handlers.NewOps(handlers.Config{Log: a.log, Metrics: metricsHandler}, a.svc),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 2 * time.Minute,
		IdleTimeout: time.Minute, MaxHeaderBytes: 8 << 10, ConnState: a.opsLn.ConnState, Protocols: http1Only(),
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)}
	if a.cfg.MetricsTLS {
		srv.TLSConfig = a.certs.ServerConfig()
	}
	return srv
}

func (a *app) service(m *metrics.Metrics) (err error) {
	a.svc, err = segments.New(a.store.envs, segments.Config{
		CacheSize:          a.cfg.CacheSize,
		CacheTTL:           a.cfg.CacheTTL,
		NoCache:            a.cfg.CacheSize == 0 || a.cfg.CacheTTL == 0,
		PollInterval:       a.cfg.StatusPollInterval,
		StaleAfter:         a.cfg.StaleAfter,
		LookupTimeout:      a.cfg.LookupTimeout,
		ReadsInFlight:      a.cfg.StoreReadsInFlight,
		ReadyRequiresFresh: a.cfg.ReadyRequiresFresh,
		ReadMetadata:       a.store.readMetadata,
		Logger:             a.log,
		ErrorCode:          a.store.errorCode,
		Observer:           func(e *segments.Environment) segments.Observer { return m.Environment(e.Name, e.CacheLen) },
	})
	return err
}

// http1Only is the protocols bigseg serves: HTTP/1.1 alone, with TLS too. With HTTP/2 one
// connection carries many requests at once, beyond what BIGSEG_MAX_CONNS bounds.
func http1Only() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	return &p
}

// run serves until ctx ends or SIGTERM or SIGINT arrives, then shuts down; SIGHUP reloads
// the API tokens, the TLS files and the embedded store. The listeners live and die together:
// the first to fail ends run, which shuts the others down and returns its error. The status
// poller, the loops that re-read the tokens and TLS files and the inventory's run in the same
// group, and stop once the listeners have (the poller serves the drain).
func (a *app) run(ctx context.Context, signals <-chan os.Signal) error {
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	group, failed := errgroup.WithContext(context.Background())
	for _, loop := range []func(context.Context) error{a.svc.Run, a.tokens.Run, a.certs.Run, a.inv.Run} {
		group.Go(func() error { return loop(loopCtx) })
	}
	group.Go(func() error { return shutdown.Serve("API", a.srv, a.ln) })
	if a.ops != nil {
		group.Go(func() error { return shutdown.Serve("metrics", a.ops, a.opsLn) })
		a.log.Info("side listener", "for", "metrics", "addr", a.opsLn.Addr().String(), "tls", a.cfg.MetricsTLS)
	}
	var prefixes []string
	for _, e := range a.svc.Environments() {
		prefixes = append(prefixes, e.Prefix)
	}
	if a.resp != nil {
		group.Go(func() error { return shutdown.Served("Redis-protocol", a.resp.Serve(a.respLn)) })
		a.log.Info("Redis-protocol listener", "addr", a.respLn.Addr().String(), "tls", a.certs != nil, "prefixes", prefixes)
	}
	a.log.Info("listening", "addr", a.ln.Addr().String(), "tls", a.certs != nil, "mutualTLS", a.cfg.TLSClientCAFile != "", "store", a.store.name,
		"auth", a.tokens.Enabled(), "version", version(), "environments", len(prefixes), "pollInterval", a.cfg.StatusPollInterval.String(),
		"staleAfter", a.cfg.StaleAfter.String(), "lookupTimeout", a.cfg.LookupTimeout.String())
	delay := shutdown.Wait(ctx, signals, failed.Done(), a.cfg.ShutdownDelay, a.reload)
	shutdownErr := a.shutdown(signals, failed, delay)
	stopLoops()
	return errors.Join(group.Wait(), shutdownErr)
}

// reload reads the API tokens file and the TLS files again, if any, and the embedded store's
// fixture, and serves it: a change, which every instance's cache and status stream follow.
func (a *app) reload() {
	a.tokens.Reload()
	a.certs.Reload()
	if a.store.reload == nil {
		a.log.Info("SIGHUP: no fixture to reload", "store", a.store.name)
		return
	}
	if err := a.store.reload(); err != nil {
		a.log.Error("SIGHUP: reload failed; still serving the data loaded before", "err", err.Error())
		return
	}
	a.svc.Poll(context.Background()) // see the change now, not at the next poll
	a.log.Info("SIGHUP: reloaded the embedded store", "seedFile", a.cfg.SeedFile)
}

// shutdown stops serving in the order load balancers need: /readyz turns 503 and every answer
// says "Connection: close" for delay (BIGSEG_SHUTDOWN_DELAY after SIGTERM; none after SIGINT
// or a listener's failure, and a further signal ends it), while requests are still served;
// then the listeners close and in-flight requests and commands get up to
// BIGSEG_WRITE_TIMEOUT to finish (status streams end at once).
func (a *app) shutdown(signals <-chan os.Signal, failed context.Context, delay time.Duration) error {
	a.svc.Drain()
	shutdown.Delay(a.log, signals, failed.Done(), delay)
	a.log.Info("shutting down: closing the listener, finishing requests", "timeout", a.cfg.ShutdownTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	var respErr error
	var wg sync.WaitGroup
	if a.resp != nil {
		wg.Go(func() { respErr = a.resp.Shutdown(ctx) })
	}
	err := shutdown.Stop(ctx, a.srv)
	wg.Wait()
	// The spans and metrics of the drain, exported within what is left of the timeout.
	if telErr := a.tel.Shutdown(ctx); telErr != nil {
		a.log.Warn("OpenTelemetry: not everything was exported by the shutdown timeout", "err", telErr.Error())
	}
	if a.ops != nil { // the probes and metrics answer until the drain is over
		a.ops.Close()
	}
	if respErr != nil {
		a.log.Warn("Redis-protocol listener: connections cut at the shutdown timeout", "err", respErr.Error())
	}
	if err == nil {
		a.log.Info("stopped")
	}
	return err
}

// close releases what newApp opened and run did not (run closes every listener it served, and
// returns once the Redis-protocol server's Shutdown has closed its connections): the
// listeners, if run never ran, and the store (the Redis client).
func (a *app) close() {
	for _, ln := range []*limit.Listener{a.opsLn, a.respLn, a.ln} {
		if ln != nil {
			ln.Close()
		}
	}
	if a.store.close != nil {
		a.store.close()
	}
	if a.tel != nil { // already shut down by run, if it ran: then this returns at once
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
		defer cancel()
		_ = a.tel.Shutdown(ctx)
	}
}

// openedStore is the configured stores, one an environment, and what the app does with them.
type openedStore struct {
	envs         []segments.Environment                        // each with its Store
	readMetadata func(context.Context) []segments.MetadataRead // every store's, at once; nil: each its own
	name, table  string                                        // "redis", "dynamodb" or "embedded", and DynamoDB's table, as /status shows
	errorCode    func(error) string                            // a bounded code of the store's errors, for logs; nil for none
	reload       func() error                                  // the embedded store only
	close        func()
}

// openStore opens the configured stores, and refuses to go on without one; m gets the metrics
// of their client, tp its spans.
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
		return openRedis(cfg, envs, prefixes, log, m, tp)
	case cfg.SeedFile == "": // served, no store would answer "no membership" for every context while healthy and ready
		return openedStore{}, errors.New("no store configured: set BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_URL, BIGSEG_REDIS_SENTINEL_URL " +
			"or BIGSEG_DYNAMODB_TABLE, or BIGSEG_SEED_FILE to try bigseg out on the embedded store")
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

func openRedis(cfg config, envs []segments.Environment, prefixes []string, log *slog.Logger, m *metrics.Metrics, tp trace.TracerProvider) (openedStore, error) {
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
	m.WatchRedisPool(func() metrics.PoolStats {
		s := client.PoolStats()
		return metrics.PoolStats{Hits: uint64(s.Hits), Misses: uint64(s.Misses), Timeouts: uint64(s.Timeouts),
			TotalConns: uint64(s.TotalConns), IdleConns: uint64(s.IdleConns), Removed: uint64(s.StaleConns)}
	})
	rs := redis.NewStores(client, prefixes...)
	for i := range envs {
		envs[i].Store = rs[i]
	}
	return openedStore{
		envs:         envs,
		readMetadata: func(ctx context.Context) []segments.MetadataRead { return redis.Metadatas(ctx, rs...) },
		name:         "redis",
		close:        func() { client.Close() },
	}, nil
}

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
		envs:         envs,
		readMetadata: func(ctx context.Context) []segments.MetadataRead { return dynamodb.Status(ctx, ds...) },
		name:         "dynamodb", table: cfg.DynamoDBTable, errorCode: dynamodb.ErrorCode, close: client.Close,
	}, nil
}
