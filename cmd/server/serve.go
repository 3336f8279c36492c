package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/guard"
	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
	"github.com/bigseg/bigseg/storage/redis"
)

// serve runs the HTTP service until ctx ends or SIGTERM or SIGINT arrives, then shuts it
// down (see app.shutdown).
func serve(ctx context.Context, signals <-chan os.Signal, cfg config, logOut io.Writer) error {
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level}))
	a, err := newApp(cfg, log)
	if err != nil {
		return err
	}
	defer a.close()
	return a.run(ctx, signals)
}

// app is the service's parts, built from the configuration by newApp; it owns every resource
// they hold, and close releases them.
type app struct {
	cfg    config
	log    *slog.Logger
	store  openedStore
	svc    *segments.Service
	srv    *http.Server
	ln     *connLimit
	sides  []*sideServer       // the metrics and profiler listeners, when configured
	certs  *guard.Certificates // the listeners' TLS files, when configured
	tokens *guard.Tokens       // the bearer tokens accepted, if any
	stop   chan struct{}       // closed when the server shuts down: status streams end
}

// newApp opens the store and the listeners and wires the service, its metrics and its HTTP
// API. Nothing runs yet.
func newApp(cfg config, log *slog.Logger) (_ *app, err error) {
	a := &app{cfg: cfg, log: log, stop: make(chan struct{})}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if a.store, err = openStore(cfg, log); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	if a.store.poolStats != nil {
		m.WatchRedisPool(a.store.poolStats)
	}
	a.svc = segments.New(a.store.store,
		segments.WithCache(cfg.CacheSize, cfg.CacheTTL),
		segments.WithCursorTTL(cfg.CacheTTLWithCursor),
		segments.WithPollInterval(cfg.StatusPollInterval),
		segments.WithStaleAfter(cfg.StaleAfter),
		segments.WithLookupTimeout(cfg.LookupTimeout),
		segments.WithReadsInFlight(cfg.StoreReadsInFlight),
		segments.WithReadyRequiresFresh(cfg.ReadyRequiresFresh),
		segments.WithLogger(log),
		segments.WithObserver(m),
	)
	m.WatchCache(a.svc.CacheLen)
	m.WatchReady(func() bool { ready, _ := a.svc.Readiness(); return ready })
	if err := a.loadCerts(m); err != nil {
		return nil, err
	}
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
		MaxRequestsInFlight: metricsInFlight})
	if err := a.listen(metricsHandler); err != nil {
		return nil, err
	}
	m.WatchConnections(a.ln.Open)
	handler, err := a.handler(m, metricsHandler)
	if err != nil {
		return nil, err
	}
	a.srv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		Protocols:         http1Only(),
		ConnState:         a.ln.ConnState,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if a.certs != nil {
		a.srv.TLSConfig = a.certs.ServerConfig()
	}
	a.srv.RegisterOnShutdown(func() { close(a.stop) })
	return a, nil
}

// loadCerts reads the listeners' TLS files, when configured, and exports their state.
func (a *app) loadCerts(m *metrics.Metrics) (err error) {
	if a.cfg.TLSCertFile == "" {
		return nil
	}
	a.certs, err = guard.NewCertificates(a.cfg.TLSCertFile, a.cfg.TLSKeyFile, a.cfg.TLSClientCAFile, []string{"http/1.1"}, a.log, m.TLSCertificate)
	return err
}

// metricsInFlight bounds the scrapes answered at once (each renders every metric): beyond
// it, a scrape gets 503.
const metricsInFlight = 4

// http1Only is the protocols bigseg serves: HTTP/1.1 alone, with TLS too. With HTTP/2 one
// connection carries many requests at once, each with its goroutine and buffers, beyond what
// BIGSEG_MAX_CONNS bounds; clients that multiplex have keep-alive pools and batches instead.
func http1Only() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	return &p
}

// listen opens the API's listener, under the connection limit, and the side listeners.
func (a *app) listen(metricsHandler http.Handler) error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	a.ln = newConnLimit(ln, a.cfg.MaxConns)
	if a.cfg.MetricsAddr != "" {
		ops := handlers.NewOps(a.svc, handlers.WithLogger(a.log), handlers.WithMetrics(metricsHandler))
		var tc *tls.Config
		if a.cfg.MetricsTLS {
			tc = a.certs.ServerConfig()
		}
		if err := a.side("metrics", a.cfg.MetricsAddr, ops, tc, 30*time.Second); err != nil {
			return err
		}
	}
	if a.cfg.PprofAddr != "" {
		return a.side("pprof", a.cfg.PprofAddr, pprofMux(), nil, 2*time.Minute)
	}
	return nil
}

// handler builds the HTTP API.
func (a *app) handler(m *metrics.Metrics, metricsHandler http.Handler) (http.Handler, error) {
	var err error
	a.tokens, err = guard.NewTokens(a.cfg.APITokens, a.cfg.APITokensFile, a.log, m.APITokensFile)
	if err != nil {
		return nil, err
	}
	if a.cfg.MetricsAddr != "" {
		metricsHandler = nil // served on its own listener only
	}
	return handlers.New(a.svc,
		handlers.WithLogger(a.log),
		handlers.WithStoreName(a.store.name),
		handlers.WithMaxKeyBytes(a.cfg.MaxKeyBytes),
		handlers.WithMaxBatch(a.cfg.MaxBatch),
		handlers.WithMaxBatchRefs(a.cfg.MaxBatchRefs),
		handlers.WithMaxBodyBytes(a.cfg.MaxBodyBytes),
		handlers.WithBodyReadTimeout(a.cfg.BodyReadTimeout),
		handlers.WithBodyMemory(a.cfg.BodyMemoryBytes),
		handlers.WithMaxStreams(a.maxStreams()),
		handlers.WithRequestObserver(m.ObserveRequest),
		handlers.WithMetrics(metricsHandler),
		handlers.WithTokens(a.tokens),
		handlers.WithLoadShedding(a.cfg.MaxInflight, a.cfg.ShedWait),
		handlers.WithAccessLog(a.cfg.AccessLog),
		handlers.WithStop(a.stop),
	), nil
}

// maxStreams is BIGSEG_MAX_STREAMS, held to half of BIGSEG_MAX_CONNS: an open status stream
// is a connection in use, which the connection limit never closes to make room, so more
// streams than that could take every connection and lock other clients out.
func (a *app) maxStreams() int {
	n := min(a.cfg.MaxStreams, a.cfg.MaxConns/2)
	if n < a.cfg.MaxStreams {
		a.log.Warn("BIGSEG_MAX_STREAMS lowered to half of BIGSEG_MAX_CONNS, so that status streams cannot take every connection",
			"maxStreams", n)
	}
	return n
}

// run serves until ctx ends or SIGTERM or SIGINT arrives, then shuts down; SIGHUP reloads
// the embedded store. The status poller runs meanwhile and stops only once the server has.
func (a *app) run(ctx context.Context, signals <-chan os.Signal) error {
	pollCtx, stopPolling := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.svc.Run(pollCtx) })
	defer func() {
		stopPolling()
		wg.Wait()
	}()
	for _, s := range a.sides {
		s.start(a.log)
	}
	serveErr := make(chan error, 1)
	go func() {
		if a.certs != nil {
			serveErr <- a.srv.ServeTLS(a.ln, "", "")
			return
		}
		serveErr <- a.srv.Serve(a.ln)
	}()
	a.log.Info("listening", "addr", a.ln.Addr().String(), "tls", a.certs != nil, "mutualTLS", a.cfg.TLSClientCAFile != "",
		"store", a.store.name, "auth", a.cfg.APITokensFile != "" || len(a.cfg.APITokens) > 0,
		"pollInterval", a.svc.PollInterval().String(), "staleAfter", a.svc.StaleAfter().String(), "lookupTimeout", a.cfg.LookupTimeout.String())
	for {
		select {
		case err := <-serveErr:
			return fmt.Errorf("serve: %w", err)
		case <-ctx.Done():
			return a.shutdown(signals, serveErr)
		case sig := <-signals:
			if sig == syscall.SIGHUP {
				a.reload()
				continue
			}
			return a.shutdown(signals, serveErr)
		}
	}
}

// reload reads the API tokens file again, if any, and the embedded store's fixture, and
// serves it: a change, which every instance's cache and status stream follow. With Redis there
// is no fixture to reload.
func (a *app) reload() {
	a.tokens.Reload()
	if a.store.reload == nil {
		a.log.Info("SIGHUP: nothing to reload (the store is Redis)")
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
// says "Connection: close" for BIGSEG_SHUTDOWN_DELAY (a further interrupt ends the delay),
// while requests are still served; then the listener closes and in-flight requests get up to
// BIGSEG_SHUTDOWN_TIMEOUT to finish (status streams end at once).
func (a *app) shutdown(signals <-chan os.Signal, serveErr <-chan error) error {
	a.svc.Drain()
	a.log.Info("shutting down: not ready, still serving", "delay", a.cfg.ShutdownDelay.String())
	delay := time.NewTimer(a.cfg.ShutdownDelay)
	defer delay.Stop()
wait:
	for {
		select {
		case <-delay.C:
			break wait
		case sig := <-signals:
			if sig != syscall.SIGHUP {
				a.log.Info("shutting down: delay cut short by a second signal")
				break wait
			}
		case err := <-serveErr:
			return fmt.Errorf("serve: %w", err)
		}
	}
	a.log.Info("shutting down: closing the listener, finishing requests", "timeout", a.cfg.ShutdownTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		a.srv.Close() // requests still running past the timeout: cut them
		<-serveErr
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	a.log.Info("stopped")
	return nil
}

// close releases what newApp opened: the side listeners, the API's listener if it never
// served, and the store (the Redis client).
func (a *app) close() {
	for _, s := range a.sides {
		s.stop()
	}
	if a.ln != nil {
		a.ln.Close()
	}
	if a.store.close != nil {
		a.store.close()
	}
}

// openedStore is the configured store and what main must do with it.
type openedStore struct {
	store     segments.Store
	name      string // "redis" or "memory", as /status shows
	poolStats func() metrics.PoolStats
	reload    func() error // the embedded store only
	close     func()
}

// openStore opens the configured store.
func openStore(cfg config, log *slog.Logger) (openedStore, error) {
	if cfg.topology() == topologyNone {
		return openMemoryStore(cfg, log)
	}
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

// openMemoryStore opens the embedded store with the fixture of BIGSEG_SEED_FILE, if any.
func openMemoryStore(cfg config, log *slog.Logger) (openedStore, error) {
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
	store := memory.New(f, time.Now())
	log.Warn("using the embedded store: it is a fixed snapshot for trying bigseg out, not for production; set BIGSEG_REDIS_URL",
		"store", "memory", "seedFile", cfg.SeedFile, "contexts", store.Len())
	reload := func() error {
		f, err := read()
		if err == nil {
			store.Replace(f, time.Now())
		}
		return err
	}
	return openedStore{store: store, name: "memory", reload: reload, close: func() {}}, nil
}

func poolStats(s *goredis.PoolStats) metrics.PoolStats {
	return metrics.PoolStats{
		Hits: uint64(s.Hits), Misses: uint64(s.Misses), Timeouts: uint64(s.Timeouts),
		TotalConns: uint64(s.TotalConns), IdleConns: uint64(s.IdleConns), Removed: uint64(s.StaleConns),
	}
}

func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// sideServer serves the metrics and probes, or the profiler, on a listener of their own, kept
// apart from the API.
type sideServer struct {
	name string
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed once Serve has returned; nil if never started
}

// sideConns bounds the connections of each side listener: scrapers, probes and profilers
// need few.
const sideConns = 64

// side opens a side listener, with TLS when tc is set; run starts it. It answers little and
// to few clients, so a connection limit and short timeouts bound what clients can hold
// there; writes may take as long as a profile (pprof's default 30 s, up to writeTimeout).
func (a *app) side(name, addr string, h http.Handler, tc *tls.Config, writeTimeout time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s listener: %w", name, err)
	}
	limited := newConnLimit(ln, sideConns)
	a.sides = append(a.sides, &sideServer{name: name, ln: limited, srv: &http.Server{Handler: h, TLSConfig: tc,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: writeTimeout,
		IdleTimeout: time.Minute, MaxHeaderBytes: 8 << 10, ConnState: limited.ConnState, Protocols: http1Only(),
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)}})
	return nil
}

func (s *sideServer) start(log *slog.Logger) {
	s.done = make(chan struct{})
	withTLS := s.srv.TLSConfig != nil // Serve changes the config: read it before
	go func() {
		defer close(s.done)
		if withTLS {
			_ = s.srv.ServeTLS(s.ln, "", "")
			return
		}
		_ = s.srv.Serve(s.ln)
	}()
	log.Info("side listener", "for", s.name, "addr", s.ln.Addr().String(), "tls", withTLS)
}

// stop stops the server and waits for it, or closes the listener if it never served.
func (s *sideServer) stop() {
	s.srv.Close()
	s.ln.Close()
	if s.done != nil {
		<-s.done
	}
}
