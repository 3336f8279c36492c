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
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/config"
	"github.com/bigseg/bigseg/internal/guard"
	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/resp"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/memory"
	"github.com/bigseg/bigseg/storage/redis"
)

// serve runs the HTTP service until ctx ends or a signal asks it to stop, then shuts it down
// (see app.shutdown).
func serve(ctx context.Context, signals <-chan os.Signal, cfg config.Config, logOut io.Writer) error {
	level, _ := config.ParseLevel(cfg.LogLevel)
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
	cfg    config.Config
	log    *slog.Logger
	store  openedStore
	svc    *segments.Service // every environment's lookups and status
	srv    *http.Server
	ln     *guard.Listener
	resp   *respListener       // the Redis-protocol listener, when configured
	shed   *guard.Shedder      // lookups' slots, on every listener
	sides  []*sideServer       // the metrics and profiler listeners, when configured
	certs  *guard.Certificates // the listeners' TLS files, when configured
	tokens *guard.Tokens       // the bearer tokens accepted, if any
	stop   chan struct{}       // closed when the server shuts down: status streams end
}

// newApp opens the store and the listeners and wires the service, its metrics and its HTTP
// API. Nothing runs yet.
func newApp(cfg config.Config, log *slog.Logger) (_ *app, err error) {
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
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	m.BuildInfo(version(), runtime.Version())
	if a.store.poolStats != nil {
		m.WatchRedisPool(a.store.poolStats)
	}
	if err := a.service(m); err != nil {
		return nil, err
	}
	m.WatchReady(func() bool { ready, _ := a.svc.Readiness(); return ready })
	if cfg.TLSCertFile != "" {
		if a.certs, err = guard.NewCertificates(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile, []string{"http/1.1"}, log, m.TLSCertificate); err != nil {
			return nil, err
		}
	}
	var names []string
	for _, e := range a.svc.Environments() {
		names = append(names, e.Name)
	}
	if a.tokens, err = guard.NewTokens(cfg.APITokens, cfg.APITokensFile, log, m.APITokensFile, names...); err != nil {
		return nil, err
	}
	a.shed = guard.NewShedder(cfg.MaxInflight, cfg.ShedWait)
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
		MaxRequestsInFlight: metricsInFlight})
	if err := a.listen(m, metricsHandler); err != nil {
		return nil, err
	}
	a.srv = &http.Server{
		Handler:           handlers.New(a.handlersConfig(m, metricsHandler), a.svc),
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

// service makes the service of every environment, each over its store.
func (a *app) service(m *metrics.Metrics) (err error) {
	envs := a.store.envs
	for i := range envs {
		envs[i].Store = a.store.stores[i]
	}
	a.svc, err = segments.New(envs,
		segments.WithCache(a.cfg.CacheSize, a.cfg.CacheTTL),
		segments.WithCursorTTL(a.cfg.CacheTTLWithCursor),
		segments.WithPollInterval(a.cfg.StatusPollInterval),
		segments.WithStaleAfter(a.cfg.StaleAfter),
		segments.WithLookupTimeout(a.cfg.LookupTimeout),
		segments.WithReadsInFlight(a.cfg.StoreReadsInFlight),
		segments.WithReadyRequiresFresh(a.cfg.ReadyRequiresFresh),
		segments.WithMetadataRead(a.store.readMetadata),
		segments.WithLogger(a.log),
		segments.WithObserver(func(e *segments.Environment) segments.Observer { return m.Environment(e.Name, e.CacheLen) }),
	)
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
func (a *app) listen(m *metrics.Metrics, metricsHandler http.Handler) error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	a.ln = guard.NewListener(ln, a.cfg.MaxConns)
	m.WatchConnections(a.ln.Open)
	if a.cfg.MetricsAddr != "" {
		ops := handlers.NewOps(handlers.Config{Log: a.log, Metrics: metricsHandler}, a.svc)
		var tc *tls.Config
		if a.cfg.MetricsTLS {
			tc = a.certs.ServerConfig()
		}
		if err := a.side("metrics", a.cfg.MetricsAddr, ops, tc, 30*time.Second); err != nil {
			return err
		}
	}
	if a.cfg.PprofAddr != "" {
		if err := a.side("pprof", a.cfg.PprofAddr, pprofMux(), nil, 2*time.Minute); err != nil {
			return err
		}
	}
	if a.cfg.RESPAddr != "" {
		return a.listenRESP(m)
	}
	return nil
}

// respListener is the Redis-protocol listener and its server.
type respListener struct {
	ln      net.Listener
	srv     *resp.Server
	stopped chan struct{} // closed once Serve has returned; nil if never started
}

// listenRESP opens the Redis-protocol listener, under a connection limit of its own, with TLS
// when BIGSEG_RESP_TLS is set.
func (a *app) listenRESP(m *metrics.Metrics) error {
	raw, err := net.Listen("tcp", a.cfg.RESPAddr)
	if err != nil {
		return fmt.Errorf("Redis-protocol listener: %w", err)
	}
	limited := guard.NewListener(raw, a.cfg.RESPMaxConns)
	var ln net.Listener = limited
	if a.cfg.RESPTLS {
		ln = tls.NewListener(limited, a.certs.ServerConfig())
	}
	a.resp = &respListener{ln: ln, srv: resp.New(resp.Config{
		Version: version(), Log: a.log, Tokens: a.tokens, Shed: a.shed, Listener: limited,
		IdleTimeout: a.cfg.RESPIdleTimeout, ReadTimeout: a.cfg.RESPReadTimeout,
		Observe: m.RESP(resp.Commands(), limited.Open),
	}, a.svc.Environments()...)}
	return nil
}

// handlersConfig is the HTTP API's configuration, with the defences where they belong.
func (a *app) handlersConfig(m *metrics.Metrics, metricsHandler http.Handler) handlers.Config {
	if a.cfg.MetricsAddr != "" {
		metricsHandler = nil // served on its own listener only
	}
	streams := a.ln.MaxStreams(a.cfg.MaxStreams)
	if streams < a.cfg.MaxStreams {
		a.log.Warn("BIGSEG_MAX_STREAMS lowered to half of BIGSEG_MAX_CONNS, so that status streams cannot take every connection",
			"maxStreams", streams)
	}
	cfg := handlers.Config{
		Log: a.log, StoreName: a.store.name, Version: version(),
		MaxKeyBytes: a.cfg.MaxKeyBytes, MaxBatch: a.cfg.MaxBatch, MaxBatchRefs: a.cfg.MaxBatchRefs,
		MaxBodyBytes: a.cfg.MaxBodyBytes, BodyReadTimeout: a.cfg.BodyReadTimeout,
		Stop: a.stop, Observe: m.ObserveRequest, AccessLog: a.cfg.AccessLog, Metrics: metricsHandler,
		Bodies:  guard.NewBodies(a.cfg.BodyMemoryBytes),
		Shed:    a.shed,
		Streams: guard.Streams(streams, handlers.Error),
		Tokens:  a.tokens,
	}
	return cfg
}

// run serves until ctx ends or SIGTERM or SIGINT arrives, then shuts down; SIGHUP reloads
// the API tokens and the embedded store. The status poller runs meanwhile and stops only once
// the server has.
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
	if a.resp != nil {
		a.resp.stopped = make(chan struct{})
		go func() {
			defer close(a.resp.stopped)
			if err := a.resp.srv.Serve(a.resp.ln); err != nil {
				a.log.Error("Redis-protocol listener stopped", "err", err.Error())
			}
		}()
		a.log.Info("Redis-protocol listener", "addr", a.resp.ln.Addr().String(), "tls", a.cfg.RESPTLS, "prefixes", a.store.prefixes())
	}
	a.log.Info("listening", "addr", a.ln.Addr().String(), "tls", a.certs != nil, "mutualTLS", a.cfg.TLSClientCAFile != "",
		"store", a.store.name, "auth", a.tokens.Enabled(), "version", version(),
		"environments", len(a.svc.Environments()), "pollInterval", a.cfg.StatusPollInterval.String(), "staleAfter", a.cfg.StaleAfter.String(),
		"lookupTimeout", a.cfg.LookupTimeout.String())
	for {
		select {
		case err := <-serveErr:
			return fmt.Errorf("serve: %w", err)
		case <-ctx.Done():
			return a.shutdown(signals, serveErr, a.cfg.ShutdownDelay)
		case sig := <-signals:
			switch sig {
			case syscall.SIGHUP:
				a.reload()
				continue
			case os.Interrupt: // Ctrl-C in a terminal: no load balancer to wait for
				return a.shutdown(signals, serveErr, 0)
			}
			return a.shutdown(signals, serveErr, a.cfg.ShutdownDelay)
		}
	}
}

// reload reads the API tokens file again, if any, and the embedded store's fixture, and
// serves it: a change, which every instance's cache and status stream follow. With Redis there
// is no fixture to reload.
func (a *app) reload() {
	a.tokens.Reload()
	if a.store.reload == nil {
		a.log.Info("SIGHUP: no fixture to reload (the store is Redis)")
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
// says "Connection: close" for delay (BIGSEG_SHUTDOWN_DELAY after SIGTERM; none after SIGINT,
// and a further signal ends it), while requests are still served; then the listener closes and
// in-flight requests get up to BIGSEG_SHUTDOWN_TIMEOUT to finish (status streams end at once).
func (a *app) shutdown(signals <-chan os.Signal, serveErr <-chan error, delay time.Duration) error {
	a.svc.Drain()
	if delay > 0 {
		a.log.Info("shutting down: not ready, still serving", "delay", delay.String(), "then", "a second SIGTERM or SIGINT ends the delay")
		if err := a.wait(signals, serveErr, delay); err != nil {
			return err
		}
	}
	a.log.Info("shutting down: closing the listener, finishing requests", "timeout", a.cfg.ShutdownTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	respDone := a.shutdownRESP(ctx)
	defer func() { <-respDone }()
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

// shutdownRESP stops the Redis-protocol listener as the HTTP server stops: no new
// connections, the commands in progress answered, then every connection closed; the channel
// is closed once it has.
func (a *app) shutdownRESP(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if a.resp == nil || a.resp.stopped == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		if err := a.resp.srv.Shutdown(ctx); err != nil {
			a.log.Warn("Redis-protocol listener: connections cut at the shutdown timeout", "err", err.Error())
		}
		<-a.resp.stopped
	}()
	return done
}

// wait waits out the shutdown delay, unless a second SIGTERM or SIGINT ends it first.
func (a *app) wait(signals <-chan os.Signal, serveErr <-chan error, delay time.Duration) error {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return nil
		case sig := <-signals:
			if sig != syscall.SIGHUP {
				a.log.Info("shutting down: delay cut short by a second signal")
				return nil
			}
		case err := <-serveErr:
			return fmt.Errorf("serve: %w", err)
		}
	}
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
	if a.resp != nil {
		a.resp.srv.Close()
		a.resp.ln.Close()
		if a.resp.stopped != nil {
			<-a.resp.stopped
		}
	}
	if a.store.close != nil {
		a.store.close()
	}
}

// openedStore is the configured stores, one an environment, and what main must do with them.
type openedStore struct {
	envs         []segments.Environment // by name and prefix
	stores       []segments.Store
	readMetadata func(context.Context) []segments.MetadataRead // every store's, at once; nil: each its own
	name         string                                        // "redis" or "memory", as /status shows
	poolStats    func() metrics.PoolStats
	reload       func() error // the embedded store only
	close        func()
}

// prefixes are the key prefixes served, as the log names them.
func (o openedStore) prefixes() string {
	var p []string
	for _, e := range o.envs {
		p = append(p, e.Prefix)
	}
	return strings.Join(p, ",")
}

// openStore opens the configured stores.
func openStore(cfg config.Config, log *slog.Logger) (openedStore, error) {
	envs, err := cfg.Served()
	if err != nil {
		return openedStore{}, err
	}
	if !cfg.HasRedis() {
		return openMemoryStore(cfg, envs, log)
	}
	opts, err := cfg.RedisOptions()
	if err != nil {
		return openedStore{}, err
	}
	client, err := redis.NewClient(opts)
	if err != nil {
		return openedStore{}, fmt.Errorf("BIGSEG_REDIS_URL: %w", err)
	}
	var prefixes []string
	for _, e := range envs {
		prefixes = append(prefixes, e.Prefix)
	}
	log.Info("using Redis", "store", "redis", "topology", opts.Topology(), "addrs", opts.Addrs(),
		"tls", opts.TLS != nil, "prefixes", prefixes)
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

// openMemoryStore opens the embedded store with the fixture of BIGSEG_SEED_FILE, if any.
func openMemoryStore(cfg config.Config, envs []segments.Environment, log *slog.Logger) (openedStore, error) {
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
		"store", "memory", "seedFile", cfg.SeedFile, "contexts", store.Len())
	reload := func() error {
		f, err := read()
		if err == nil {
			store.Replace(f)
		}
		return err
	}
	return openedStore{envs: envs, stores: []segments.Store{store}, name: "memory", reload: reload, close: func() {}}, nil
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
	limited := guard.NewListener(ln, sideConns)
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
