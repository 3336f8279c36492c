// Command ldwrapper is what a user would build instead of bigseg, for the benchmark to measure
// beside it: LaunchDarkly's Go SDK's Big Segment store wrapper
// (ldstoreimpl.NewBigSegmentStoreWrapperWithConfig: its context cache, singleflight and
// status poller, at the SDK's defaults unless told otherwise) over a store that reads the
// LaunchDarkly Redis layout as LaunchDarkly's Redis integrations do, behind chi with
// encoding/json, answering bigseg's GET /memberships/{contextKey} with bigseg's JSON shape.
//
// It is a module of its own so that the SDK never enters bigseg's go.mod.
//
//	ldwrapper -redis redis://127.0.0.1:6379 [-addr 127.0.0.1:0] [-prefix launchdarkly]
//	          [-cache-size 1000] [-cache-ttl 5s] [-pprof-addr ADDR]
//
// The SDK has no switch to turn its context cache off: -cache-ttl 0 makes it ineffective
// (every entry expires as it is stored, so every lookup reads the store; ccache still stores
// and evicts the entries).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/launchdarkly/go-sdk-common/v3/ldlog"
	"github.com/launchdarkly/go-server-sdk/v7/ldcomponents"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems/ldstoreimpl"
	goredis "github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ldwrapper:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	addr, redisURL, prefix, pprofAddr string
	cacheSize                         int
	cacheTTL                          time.Duration
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("ldwrapper", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:0", "address to listen on")
	fs.StringVar(&c.redisURL, "redis", "redis://127.0.0.1:6379", "Redis URL")
	fs.StringVar(&c.prefix, "prefix", "launchdarkly", "key prefix of the Big Segments data")
	fs.StringVar(&c.pprofAddr, "pprof-addr", "", "address for /debug/pprof, on a listener of its own")
	fs.IntVar(&c.cacheSize, "cache-size", ldcomponents.DefaultBigSegmentsContextCacheSize, "the SDK's ContextCacheSize")
	fs.DurationVar(&c.cacheTTL, "cache-ttl", ldcomponents.DefaultBigSegmentsContextCacheTime, "the SDK's ContextCacheTime; 0 makes the cache ineffective")
	return c, fs.Parse(args)
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	client, err := newRedisClient(c.redisURL)
	if err != nil {
		return err
	}
	defer client.Close()
	st := newStore(client, c.prefix)
	loggers := ldlog.NewDefaultLoggers()
	loggers.SetMinLevel(ldlog.Warn)
	wrapper := ldstoreimpl.NewBigSegmentStoreWrapperWithConfig(ldstoreimpl.BigSegmentsConfigurationProperties{
		Store:              st,
		ContextCacheSize:   c.cacheSize,
		ContextCacheTime:   c.cacheTTL,
		StatusPollInterval: ldcomponents.DefaultBigSegmentsStatusPollInterval,
		StaleAfter:         ldcomponents.DefaultBigSegmentsStaleAfter,
		StartPolling:       true, // as the SDK's client does
	}, nil, loggers)
	defer wrapper.Close()

	if c.pprofAddr != "" {
		stopPprof, err := servePprof(c.pprofAddr)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	return serve(ctx, c.addr, newHandler(wrapper, st), stderr)
}

// serve serves h on addr with bigseg's default http.Server settings until ctx ends.
func serve(ctx context.Context, addr string, h http.Handler, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 15 * time.Second, WriteTimeout: 15 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "listening on %s\n", ln.Addr())
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// newRedisClient makes a client with bigseg's default settings (storage/redis/client.go's
// defaults): the same timeouts, one retry, go-redis's default pool, and RESP2.
func newRedisClient(redisURL string) (*goredis.Client, error) {
	opts, err := goredis.ParseURL(redisURL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond
	opts.MaxRetries = 1
	opts.Protocol = 2
	return goredis.NewClient(opts), nil
}

// servePprof serves Go's profiler on a listener of its own; the returned func stops it.
func servePprof(addr string) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}
