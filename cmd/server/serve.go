package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/memory"
	"github.com/bigseg/bigseg/storage/redis"
)

// serve runs the HTTP service until ctx ends, then shuts down in the order load balancers
// need: /readyz turns 503 while requests are still served for BIGSEG_SHUTDOWN_DELAY, then the
// server stops taking requests and lets in-flight ones finish (status streams end at once),
// then the poller stops, then the Redis client closes.
func serve(ctx context.Context, cfg config, logOut io.Writer) error {
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level}))

	st, err := openStore(cfg, log)
	if err != nil {
		return err
	}
	defer st.close()

	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	if st.poolStats != nil {
		m.WatchRedisPool(st.poolStats)
	}
	svc := segments.New(st.store,
		segments.WithCache(cfg.CacheSize, cfg.CacheTTL),
		segments.WithPollInterval(cfg.StatusPollInterval),
		segments.WithStaleAfter(cfg.StaleAfter),
		segments.WithCoalescing(cfg.StoreReadsInFlight, segments.DefaultMaxReadBatch),
		segments.WithLogger(log),
		segments.WithObserver(m),
	)
	m.WatchCache(svc.CacheLen)

	tokens, err := cfg.apiTokens()
	if err != nil {
		return err
	}
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)})
	apiMetrics := metricsHandler
	if cfg.MetricsAddr != "" {
		apiMetrics = nil
	}
	drain, stop := make(chan struct{}), make(chan struct{})
	m.WatchReady(func() bool { return handlers.NotReady(svc, cfg.ReadyRequiresFresh, drain) == "" })
	handler := handlers.New(svc,
		handlers.WithLogger(log),
		handlers.WithStoreName(st.name),
		handlers.WithMaxKeyBytes(cfg.MaxKeyBytes),
		handlers.WithMaxBatch(cfg.MaxBatch),
		handlers.WithMaxBodyBytes(cfg.MaxBodyBytes),
		handlers.WithReadyRequiresFresh(cfg.ReadyRequiresFresh),
		handlers.WithRequestObserver(m.ObserveRequest),
		handlers.WithMetrics(apiMetrics),
		handlers.WithAPITokens(tokens),
		handlers.WithLoadShedding(cfg.MaxInflight, cfg.ShedWait),
		handlers.WithAccessLog(cfg.AccessLog),
		handlers.WithDrain(drain),
		handlers.WithStop(stop),
	)

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	srv.RegisterOnShutdown(func() { close(stop) })

	pollCtx, stopPoll := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = svc.Run(pollCtx) })
	defer func() {
		stopPoll()
		wg.Wait()
	}()

	if cfg.PprofAddr != "" {
		stopPprof, err := serveSide("pprof", cfg.PprofAddr, pprofMux(), log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopPprof()
	}
	if cfg.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metricsHandler)
		stopMetrics, err := serveSide("metrics", cfg.MetricsAddr, mux, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopMetrics()
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "store", st.name, "auth", len(tokens) > 0,
		"pollInterval", svc.PollInterval().String(), "staleAfter", svc.StaleAfter().String())

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	close(drain)
	log.Info("shutting down: not ready, still serving", "delay", cfg.ShutdownDelay.String())
	select {
	case <-time.After(cfg.ShutdownDelay):
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down: closing the listener, finishing requests", "timeout", cfg.ShutdownTimeout.String())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

// openedStore is the configured store and what main must do with it.
type openedStore struct {
	store     segments.Store
	name      string // "redis" or "memory", as /status shows
	poolStats func() metrics.PoolStats
	close     func()
}

// openStore opens the configured store.
func openStore(cfg config, log *slog.Logger) (openedStore, error) {
	if cfg.topology() == topologyNone {
		var f *memory.Fixture
		if cfg.SeedFile != "" {
			var err error
			if f, err = memory.ReadFixtureFile(cfg.SeedFile); err != nil {
				return openedStore{}, fmt.Errorf("BIGSEG_SEED_FILE: %w", err)
			}
		}
		store := memory.New(f, time.Now())
		log.Warn("using the embedded store: it is a fixed snapshot for trying bigseg out, not for production; set BIGSEG_REDIS_URL",
			"store", "memory", "seedFile", cfg.SeedFile, "contexts", store.Len())
		return openedStore{store: store, name: "memory", close: func() {}}, nil
	}
	goredis.SetLogger(redisLogger{log})
	client, target, err := newRedisClient(cfg)
	if err != nil {
		return openedStore{}, err
	}
	log.Info("using Redis", "store", "redis", "topology", target.topology, "addrs", target.addrs,
		"tls", target.tls, "prefix", cfg.Prefix)
	return openedStore{
		store:     redis.New(client, cfg.Prefix),
		name:      "redis",
		poolStats: func() metrics.PoolStats { return poolStats(client.PoolStats()) },
		close:     func() { client.Close() },
	}, nil
}

func poolStats(s *goredis.PoolStats) metrics.PoolStats {
	return metrics.PoolStats{
		Hits: uint64(s.Hits), Misses: uint64(s.Misses), Timeouts: uint64(s.Timeouts),
		TotalConns: uint64(s.TotalConns), IdleConns: uint64(s.IdleConns), StaleConns: uint64(s.StaleConns),
	}
}

// redisLogger sends go-redis's own log lines (reconnection attempts and the like) to slog at
// debug level: failures reach operators through lookups, polls and metrics instead.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// serveSide serves h on a listener of its own (metrics or the profiler, kept apart from the
// API); the returned function stops it and waits for it.
func serveSide(name, addr string, h http.Handler, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	log.Info("side listener", "for", name, "addr", ln.Addr().String())
	return func() {
		srv.Close()
		<-done
	}, nil
}
