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
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/internal/limit"
	"github.com/bigseg/bigseg/internal/telemetry"
	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/resp"
	"github.com/bigseg/bigseg/segments"
)

// serve runs the HTTP service until ctx ends or a signal asks it to stop, then shuts it down
// (see app.shutdown).
func serve(ctx context.Context, signals <-chan os.Signal, cfg config, logOut io.Writer) error {
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level}))
	a, err := newApp(ctx, cfg, log)
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
	svc    *segments.Service // every environment's lookups and status
	srv    *http.Server
	ln     *limit.Listener
	resp   *respListener        // the Redis-protocol listener, when configured
	shed   *limit.Shedder       // lookups' slots, on every listener
	sides  []*sideServer        // the metrics and profiler listeners, when configured
	certs  *auth.Certificates   // the listeners' TLS files, when configured
	tokens *auth.Tokens         // the bearer tokens accepted, if any
	tel    *telemetry.Telemetry // OpenTelemetry, as the OTEL_* variables set it up
	stop   chan struct{}        // closed when the server shuts down: status streams end
}

// newApp opens the store and the listeners and wires the service, its metrics and its HTTP
// API. Nothing runs yet.
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
	if a.store.poolStats != nil {
		m.WatchRedisPool(a.store.poolStats)
	}
	if err := a.service(m); err != nil {
		return nil, err
	}
	m.WatchReady(func() bool { ready, _ := a.svc.Readiness(); return ready })
	if cfg.TLSCertFile != "" {
		if a.certs, err = auth.NewCertificates(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile, []string{"http/1.1"}, log, m.TLSCertificate); err != nil {
			return nil, err
		}
	}
	var names []string
	for _, e := range a.svc.Environments() {
		names = append(names, e.Name)
	}
	if a.tokens, err = auth.NewTokens(cfg.APITokens, cfg.APITokensFile, log, m.APITokensFile, names...); err != nil {
		return nil, err
	}
	a.shed = limit.NewShedder(cfg.MaxInflight, cfg.ShedWait)
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
		// The prefix the environment is served under on the Redis-protocol listener: its own,
		// or for data with none (DynamoDB's default), the SDKs' default Redis prefix.
		envs[i].Store, envs[i].Prefix = a.store.stores[i], a.store.respPrefix(i)
	}
	a.svc, err = segments.New(envs, segments.Config{
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
	a.ln = limit.NewListener(ln, a.cfg.MaxConns)
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
	ln  net.Listener
	srv *resp.Server
}

// listenRESP opens the Redis-protocol listener, under a connection limit of its own, with TLS
// when HTTP has TLS (cfg.RESPTLS).
func (a *app) listenRESP(m *metrics.Metrics) error {
	raw, err := net.Listen("tcp", a.cfg.RESPAddr)
	if err != nil {
		return fmt.Errorf("Redis-protocol listener: %w", err)
	}
	limited := limit.NewListener(raw, a.cfg.RESPMaxConns)
	var ln net.Listener = limited
	if a.cfg.RESPTLS {
		ln = tls.NewListener(limited, a.certs.ServerConfig())
	}
	a.resp = &respListener{ln: ln, srv: resp.New(resp.Config{
		Version: version(), Log: a.log, Tokens: a.tokens, Shed: a.shed, Listener: limited,
		IdleTimeout: a.cfg.RESPIdleTimeout, ReadTimeout: a.cfg.RESPReadTimeout,
		Observe: m.RESP(resp.Commands(), limited.Open), TracerProvider: a.tel.TracerProvider,
	}, a.svc.Environments()...)}
	return nil
}

// handlersConfig is the HTTP API's configuration, with the defences where they belong.
func (a *app) handlersConfig(m *metrics.Metrics, metricsHandler http.Handler) handlers.Config {
	if a.cfg.MetricsAddr != "" {
		metricsHandler = nil // served on its own listener only
	}
	streams := a.ln.MaxStreams(a.cfg.MaxStreams)
	return handlers.Config{
		Log: a.log, StoreName: a.store.name, StoreTable: a.store.table, Version: version(),
		MaxKeyBytes: a.cfg.MaxKeyBytes, MaxBatch: a.cfg.MaxBatch, MaxBatchRefs: a.cfg.MaxBatchRefs,
		MaxBodyBytes: a.cfg.MaxBodyBytes, BodyReadTimeout: a.cfg.BodyReadTimeout,
		Stop: a.stop, Observe: m.ObserveRequest, AccessLog: a.cfg.AccessLog, Metrics: metricsHandler,
		Bodies:  limit.NewBodies(a.cfg.BodyMemoryBytes),
		Shed:    a.shed.Middleware(handlers.Error),
		Streams: limit.Streams(streams, handlers.Error),
		Auth:    a.tokens,
		Trace:   a.tel.HTTP(),
	}
}

// run serves until ctx ends or SIGTERM or SIGINT arrives, then shuts down; SIGHUP reloads
// the API tokens, the TLS files and the embedded store. The status poller and the loops that
// re-read the tokens and TLS files run meanwhile and stop only once the server has.
func (a *app) run(ctx context.Context, signals <-chan os.Signal) error {
	pollCtx, stopPolling := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.svc.Run(pollCtx) })
	wg.Go(func() { _ = a.tokens.Run(pollCtx) })
	wg.Go(func() { _ = a.certs.Run(pollCtx) })
	defer func() {
		stopPolling()
		wg.Wait()
	}()
	// Every listener lives and dies with the others: the first to fail ends run, which shuts
	// the others down and returns its error.
	listeners, failed := errgroup.WithContext(context.Background())
	listeners.Go(func() error {
		if a.certs != nil {
			return served("API", a.srv.ServeTLS(a.ln, "", ""))
		}
		return served("API", a.srv.Serve(a.ln))
	})
	for _, s := range a.sides {
		withTLS := s.srv.TLSConfig != nil // Serve changes the config: read it before
		listeners.Go(func() error {
			if withTLS {
				return served(s.name, s.srv.ServeTLS(s.ln, "", ""))
			}
			return served(s.name, s.srv.Serve(s.ln))
		})
		a.log.Info("side listener", "for", s.name, "addr", s.ln.Addr().String(), "tls", withTLS)
	}
	if a.resp != nil {
		listeners.Go(func() error { return served("Redis-protocol", a.resp.srv.Serve(a.resp.ln)) })
		a.log.Info("Redis-protocol listener", "addr", a.resp.ln.Addr().String(), "tls", a.cfg.RESPTLS, "prefixes", a.store.respPrefixes())
	}
	a.log.Info("listening", "addr", a.ln.Addr().String(), "tls", a.certs != nil, "mutualTLS", a.cfg.TLSClientCAFile != "",
		"store", a.store.name, "auth", a.tokens.Enabled(), "version", version(),
		"environments", len(a.svc.Environments()), "pollInterval", a.cfg.StatusPollInterval.String(), "staleAfter", a.cfg.StaleAfter.String(),
		"lookupTimeout", a.cfg.LookupTimeout.String())
	delay := a.cfg.ShutdownDelay
loop:
	for {
		select {
		case <-failed.Done(): // a listener failed: no load balancer is worth waiting for
			delay = 0
			break loop
		case <-ctx.Done():
			break loop
		case sig := <-signals:
			switch sig {
			case syscall.SIGHUP:
				a.reload()
				continue
			case os.Interrupt: // Ctrl-C in a terminal: no load balancer to wait for
				delay = 0
			}
			break loop
		}
	}
	shutdownErr := a.shutdown(signals, failed, delay)
	return errors.Join(listeners.Wait(), shutdownErr)
}

// served is what a listener's Serve returning tells run: nil once it was shut down, else
// its error, naming it.
func served(name string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("%s listener: %w", name, err)
}

// reload reads the API tokens file and the TLS files again, if any, and the embedded store's
// fixture, and serves it: a change, which every instance's cache and status stream follow.
// With Redis there is no fixture to reload.
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
	if delay > 0 {
		a.log.Info("shutting down: not ready, still serving", "delay", delay.String(), "then", "a second SIGTERM or SIGINT ends the delay")
		a.wait(signals, failed, delay)
	}
	a.log.Info("shutting down: closing the listener, finishing requests", "timeout", a.cfg.ShutdownTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	var respErr error
	var wg sync.WaitGroup
	if a.resp != nil {
		wg.Go(func() { respErr = a.resp.srv.Shutdown(ctx) })
	}
	err := a.srv.Shutdown(ctx)
	if err != nil {
		a.srv.Close() // requests still running past the timeout: cut them
		err = fmt.Errorf("shutdown: %w", err)
	}
	wg.Wait()
	// The spans and metrics of the drain, exported within what is left of the timeout.
	if telErr := a.tel.Shutdown(ctx); telErr != nil {
		a.log.Warn("OpenTelemetry: not everything was exported by the shutdown timeout", "err", telErr.Error())
	}
	for _, s := range a.sides { // the probes and metrics answer until the drain is over
		s.srv.Close()
	}
	if respErr != nil {
		a.log.Warn("Redis-protocol listener: connections cut at the shutdown timeout", "err", respErr.Error())
	}
	if err == nil {
		a.log.Info("stopped")
	}
	return err
}

// wait waits out the shutdown delay, unless a second SIGTERM or SIGINT, or a listener's
// failure, ends it first.
func (a *app) wait(signals <-chan os.Signal, failed context.Context, delay time.Duration) {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case <-failed.Done():
			return
		case sig := <-signals:
			if sig != syscall.SIGHUP {
				a.log.Info("shutting down: delay cut short by a second signal")
				return
			}
		}
	}
}

// close releases what newApp opened and run did not (run closes every listener it served):
// the listeners, if run never ran, and the store (the Redis client).
func (a *app) close() {
	for _, s := range a.sides {
		s.ln.Close()
	}
	if a.ln != nil {
		a.ln.Close()
	}
	if a.resp != nil {
		a.resp.srv.Close()
		a.resp.ln.Close()
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
	limited := limit.NewListener(ln, sideConns)
	a.sides = append(a.sides, &sideServer{name: name, ln: limited, srv: &http.Server{Handler: h, TLSConfig: tc,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: writeTimeout,
		IdleTimeout: time.Minute, MaxHeaderBytes: 8 << 10, ConnState: limited.ConnState, Protocols: http1Only(),
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)}})
	return nil
}
