// Command server is bigseg: an HTTP service that answers which Big Segments a context is a
// member of, from Redis data in the LaunchDarkly layout or from an embedded store.
//
//	server                      serve (configured by BIGSEG_* environment variables)
//	server -h                   list every variable with its default
//	server load [--replace] F   write fixture file F into the configured Redis
//	server healthcheck          exit 0 if the local server answers /livez
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	goredis "github.com/redis/go-redis/v9"
)

func main() {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// go-redis logs through a process-wide logger: reconnection attempts and the like, at
	// debug level, since failures reach operators through lookups, polls and metrics.
	level, _ := parseLevel(os.Getenv("BIGSEG_LOG_LEVEL"))
	goredis.SetLogger(redisLogger{slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))})
	if err := run(context.Background(), signals, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bigseg:", err)
		os.Exit(1)
	}
}

// run is the whole program; main only gives it the process's signals, environment and
// streams, so that tests can run it in-process, several at once. The first SIGTERM or SIGINT
// (or the end of ctx) begins a graceful shutdown; a second cuts the shutdown delay short.
// SIGHUP reloads the embedded store's fixture.
func run(ctx context.Context, signals <-chan os.Signal, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 1 {
		ctx, cancel := untilInterrupted(ctx, signals)
		defer cancel()
		switch args[1] {
		case "-h", "-help", "--help", "help":
			return usage(stdout)
		case "load":
			return load(ctx, args[2:], getenv, stdout, stderr)
		case "healthcheck":
			return healthcheck(ctx, args[2:], getenv, stdout, stderr)
		default:
			return fmt.Errorf("unknown command %q (try -h)", args[1])
		}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	return serve(ctx, signals, cfg, stderr)
}

// untilInterrupted returns a context that ends with ctx or at the first signal.
func untilInterrupted(ctx context.Context, signals <-chan os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-signals:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// redisLogger sends go-redis's own log lines to slog at debug level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}
