// Command server is bigseg: an HTTP service that answers which Big Segments a context is a
// member of, from Redis or DynamoDB data in the LaunchDarkly layout or from an embedded store.
// Its commands (serve, load, inventory, healthcheck) and its BIGSEG_* settings are what
// server -h prints (usage) and docs/configuration.md lists.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/bigseg/bigseg/internal/healthcheck"
	"github.com/bigseg/bigseg/storage/redis"
)

// gcBallast counts as live heap to the collector, so that (at GOGC=100) 8 MiB more may be
// allocated between two cycles; never written, it takes no RSS. Not made when GOGC or
// GOMEMLIMIT is set. docs/configuration.md says why, BENCHMARKS.md what it measured.
var gcBallast []byte

func main() {
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		gcBallast = make([]byte, 8<<20)
	}
	// go-redis has one logger per process, whatever the programs run in it (tests run
	// several): the process's, here.
	level, _ := parseLevel(cmp.Or(os.Getenv(varPrefix+"_LOG_LEVEL"), "info"))
	redis.SetLogger(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	// Only main sees the names of the process's variables: a BIGSEG_* one that names no
	// setting is refused here (but for -h).
	err := unknownVariables(os.Environ())
	if err == nil || slices.ContainsFunc(os.Args[1:], isHelp) {
		err = run(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bigseg:", err)
		os.Exit(1)
	}
}

// run is the whole program, with the process's arguments, its environment (getenv; an empty
// variable counts as unset) and its streams, so that tests can run it in-process, several at
// once. SIGTERM (or the end of ctx) begins a graceful shutdown, SIGINT a quick one (see
// app.shutdown); SIGHUP reloads the API tokens file, the TLS files and the embedded store's
// fixture.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := ""
	if len(args) > 1 {
		cmd = args[1]
	}
	switch cmd {
	case "-h", "-help", "--help", "help":
		return usage(stdout)
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, "bigseg", version())
		return nil
	case "", "load", "healthcheck", "inventory":
	default:
		return fmt.Errorf("unknown command %q (try -h)", cmd)
	}
	cfg, err := loadConfig(getenv)
	if err != nil && !(cmd != "" && slices.ContainsFunc(args[2:], isHelp)) { // a command's -h needs no settings
		return err
	}
	if cmd == "" {
		level, _ := parseLevel(cfg.LogLevel)
		signals := make(chan os.Signal, 2)
		signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		defer signal.Stop(signals)
		a, err := newApp(ctx, cfg, slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})))
		if err != nil {
			return err
		}
		defer a.close()
		return a.run(ctx, signals)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP) // the first signal ends a command
	defer stop()
	switch cmd {
	case "load":
		err = load(ctx, args[2:], cfg, stdout, stderr, time.Now)
	case "healthcheck": // needs no store
		err = runHealthcheck(ctx, args[2:], cfg, stdout, stderr)
	case "inventory":
		err = runInventory(ctx, args[2:], cfg, stdout, stderr)
	}
	if errors.Is(err, flag.ErrHelp) { // asked for, and printed: not a failure
		return nil
	}
	return err
}

// isHelp says whether a command's argument asks for its usage, as package flag takes it.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--h" || arg == "--help"
}

// version is the module version bigseg was built as, which go build records: a tag's, or from a
// checkout a pseudo-version naming the VCS revision (+dirty with uncommitted changes); "(devel)"
// when it recorded none.
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Main.Version
	}
	return "unknown"
}

// runHealthcheck runs "server healthcheck": it asks the server on this host for /livez, where
// healthcheck.Self says its settings make it answer.
func runHealthcheck(ctx context.Context, args []string, cfg config, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	given := fs.String("url", "", "URL to check (default: /livez at BIGSEG_METRICS_ADDR or BIGSEG_ADDR, on 127.0.0.1 if it names no host)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	url, client, err := healthcheck.Self(healthcheck.Server{URL: *given,
		API:       healthcheck.Listener{Setting: "BIGSEG_ADDR", Addr: cfg.Addr, TLS: cfg.TLSCertFile != ""},
		Metrics:   healthcheck.Listener{Setting: "BIGSEG_METRICS_ADDR", Addr: cfg.MetricsAddr, TLS: cfg.MetricsTLS},
		MutualTLS: cfg.TLSClientCAFile != "", CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := healthcheck.Get(ctx, client, url); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}
