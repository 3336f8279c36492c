package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/memory"
	"github.com/bigseg/bigseg/storage/redis"
)

// serve runs the HTTP service until ctx ends, then shuts down: the server first (letting
// in-flight requests finish), then the poller, then the Redis client. listening, when set, is
// told the bound address.
func serve(ctx context.Context, cfg config, logOut io.Writer, listening func(addr string)) error {
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level}))

	store, closeStore, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()

	svc := segments.New(store,
		segments.WithCache(cfg.CacheSize, cfg.CacheTTL),
		segments.WithPollInterval(cfg.StatusPollInterval),
		segments.WithStaleAfter(cfg.StaleAfter),
		segments.WithLogger(log),
	)
	handler := handlers.New(svc,
		handlers.WithLogger(log),
		handlers.WithMaxKeyBytes(cfg.MaxKeyBytes),
		handlers.WithMaxBatch(cfg.MaxBatch),
		handlers.WithMaxBodyBytes(cfg.MaxBodyBytes),
	)

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}

	pollCtx, stopPoll := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = svc.Run(pollCtx) })
	defer func() {
		stopPoll()
		wg.Wait()
	}()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(),
		"pollInterval", svc.PollInterval().String(), "staleAfter", svc.StaleAfter().String())
	if listening != nil {
		listening(ln.Addr().String())
	}

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
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

// openStore opens the configured store and returns how to close it.
func openStore(ctx context.Context, cfg config, log *slog.Logger) (segments.Store, func(), error) {
	if cfg.RedisURL == "" {
		var f *memory.Fixture
		if cfg.SeedFile != "" {
			var err error
			if f, err = memory.ReadFixtureFile(cfg.SeedFile); err != nil {
				return nil, nil, fmt.Errorf("BIGSEG_SEED_FILE: %w", err)
			}
		}
		store := memory.New(f, time.Now())
		log.Warn("using the embedded store: it is a fixed snapshot for trying bigseg out, not for production; set BIGSEG_REDIS_URL",
			"store", "memory", "seedFile", cfg.SeedFile, "contexts", store.Len())
		return store, func() {}, nil
	}
	opts, err := goredis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("BIGSEG_REDIS_URL: %w", redactURLError(err, cfg.RedisURL))
	}
	opts.DialTimeout = cfg.RedisDialTimeout
	opts.ReadTimeout = cfg.RedisReadTimeout
	opts.WriteTimeout = cfg.RedisWriteTimeout
	opts.MaxRetries = cfg.RedisMaxRetries
	opts.PoolSize = cfg.RedisPoolSize
	goredis.SetLogger(redisLogger{log})
	client := goredis.NewClient(opts)
	log.Info("using Redis", "store", "redis", "addr", opts.Addr, "db", opts.DB, "prefix", cfg.Prefix)
	return redis.New(client, cfg.Prefix), func() { client.Close() }, nil
}

// redisLogger sends go-redis's own log lines (reconnection attempts and the like) to slog at
// debug level: failures reach operators through lookups, polls and metrics instead.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}
