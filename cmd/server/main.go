// Command server is bigseg: an HTTP service that answers which Big Segments a context is a
// member of, from Redis or DynamoDB data in the LaunchDarkly layout or from an embedded store.
// Its commands (serve, load, inventory, healthcheck) and its BIGSEG_* settings are what
// server -h prints (usage) and docs/configuration.md lists.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/internal/healthcheck"
	"github.com/bigseg/bigseg/internal/inventory"
	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/fixture"
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
		if err := needStore(cfg); err != nil {
			return err
		}
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

// load runs "server load [--replace] [--dry-run] FILE": it writes a fixture into the configured
// Redis or DynamoDB table (fixture.LoadFile), its progress to stderr, a summary to stdout.
func load(ctx context.Context, args []string, cfg config, stdout, stderr io.Writer, now func() time.Time) error {
	opts, envName, file, err := parseLoadArgs(args, stderr)
	if err != nil {
		return err
	}
	prefix, err := cfg.environmentPrefix(envName)
	if err != nil {
		return err
	}
	report := fixture.Report{W: stderr, Now: now, Unit: "sets", DryRun: opts.DryRun}
	open := func() (fixture.Loader, string, func(), error) {
		ro, err := cfg.redisOptions()
		if err != nil {
			return nil, "", nil, err
		}
		client, err := redis.NewClient(ro)
		if err != nil {
			return nil, "", nil, err
		}
		where := fmt.Sprintf("%s Redis %v under prefix %q", ro.Topology(), ro.Addrs(), prefix)
		return redis.New(client, prefix), where, func() { client.Close() }, nil
	}
	switch {
	case cfg.hasDynamoDB():
		report.Unit = "items"
		open = func() (fixture.Loader, string, func(), error) {
			// Throttling is retried longer than lookups do: a bulk write should slow down, not fail.
			client, err := dynamodb.NewClient(ctx, dynamodb.ClientOptions{MaxAttempts: 10, MaxBackoff: 2 * time.Second})
			if err != nil {
				return nil, "", nil, err
			}
			where := fmt.Sprintf("DynamoDB table %s (region %s) under prefix %q", cfg.DynamoDBTable, client.Region(), prefix)
			return dynamodb.New(client, cfg.DynamoDBTable, prefix), where, client.Close, nil
		}
	case !cfg.hasRedis():
		return errors.New("load: no store configured: set BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_URL, BIGSEG_REDIS_SENTINEL_URL or BIGSEG_DYNAMODB_TABLE")
	}
	return fixture.LoadFile(ctx, file, opts, report, stdout, open)
}

// parseLoadArgs reads load's flags, wherever they are among its arguments, and its one file.
func parseLoadArgs(args []string, stderr io.Writer) (opts fixture.LoadOptions, env, file string, err error) {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&opts.Replace, "replace", false, "make the store match the file: remove refs it does not list, and the sets (DynamoDB: items) of contexts it does not list")
	fs.BoolVar(&opts.DryRun, "dry-run", false, "read the store and say what the load would write and delete, and change nothing")
	fs.IntVar(&opts.BatchSize, "batch", 1000, "contexts per pipeline (DynamoDB: read, then written, per batch)")
	fs.StringVar(&env, "environment", "", "the environment to write (a name of BIGSEG_ENVIRONMENTS; needed when there are several)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: server load [--replace] [--dry-run] [--batch N] [--environment NAME] FILE\n\n"+
			"Writes FILE (the format of examples/memberships.json, at most %d MiB) into the Redis\n"+
			"configured by the BIGSEG_REDIS_* variables, or the table of BIGSEG_DYNAMODB_TABLE, under\n"+
			"BIGSEG_PREFIX (or the prefix of the environment named), and sets that environment's\n"+
			"cursor. Idempotent.\n\n", fixture.MaxBytes>>20)
		fs.PrintDefaults()
	}
	var files []string
	for { // "load FILE --replace" as well as "load --replace FILE"
		if err := fs.Parse(args); err != nil {
			return opts, "", "", err
		}
		if fs.NArg() == 0 {
			break
		}
		files, args = append(files, fs.Arg(0)), fs.Args()[1:]
	}
	if len(files) != 1 {
		fs.Usage()
		return opts, "", "", errors.New("load: give exactly one fixture file")
	}
	return opts, env, files[0], nil
}

// runInventory runs "server inventory [--environment NAME] [--json]": one scan of each
// environment's store (inventory.Report) at BIGSEG_INVENTORY_READS_PER_SECOND, its counts to
// stdout (with --json, what GET /segments answers), its progress to stderr when that is a
// terminal. Its scan is its own: running servers' /segments keep their own scans' counts.
func runInventory(ctx context.Context, args []string, cfg config, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inventory", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("environment", "", "the environment to scan (a name of BIGSEG_ENVIRONMENTS; default: every one)")
	asJSON := fs.Bool("json", false, "print what GET /segments answers (an array of them for several environments), not tables")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("inventory: unexpected argument %q: the flags are --environment NAME and --json", fs.Arg(0))
	}
	if err := needStore(cfg); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := openStore(ctx, cfg, log, metrics.New(prometheus.NewRegistry()), nil)
	if err != nil {
		return err
	}
	defer store.close()
	svc, err := segments.New(store.envs, segments.Config{Logger: log})
	if err != nil {
		return err
	}
	out := inventory.Output{Environment: *name, Store: store.name, Table: store.table}
	if *asJSON {
		out.JSON = handlers.WriteInventories
	}
	return inventory.Report(ctx, svc.Environments(), inventory.Settings{ReadsPerSecond: cfg.InventoryReadsPerSecond}, out, stdout, stderr)
}

// runHealthcheck runs "server healthcheck": it asks the server on this host for /livez (see
// package healthcheck): the metrics listener when there is one, else the API's, over HTTPS
// when that listener has TLS. Under mutual TLS it presents the server's own certificate (which
// works where one CA issues both, as cert-manager's CA issuers do; else set
// BIGSEG_METRICS_ADDR).
func runHealthcheck(ctx context.Context, args []string, cfg config, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "URL to check (default: /livez at BIGSEG_METRICS_ADDR or BIGSEG_ADDR, on 127.0.0.1 if it names no host)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	client := http.DefaultClient
	if *url == "" {
		name, addr, tlsOn := "BIGSEG_ADDR", cfg.Addr, cfg.TLSCertFile != ""
		if cfg.MetricsAddr != "" {
			name, addr, tlsOn = "BIGSEG_METRICS_ADDR", cfg.MetricsAddr, cfg.MetricsTLS
		}
		var cert *tls.Certificate
		if tlsOn && cfg.TLSClientCAFile != "" {
			c, err := auth.LoadKeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
			if err != nil {
				return fmt.Errorf("healthcheck: %w", err)
			}
			cert = &c
		}
		var err error
		if *url, client, err = healthcheck.Self(name, addr, tlsOn, cert); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := healthcheck.Get(ctx, client, *url); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}
