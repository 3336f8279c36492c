package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/inventory"
	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
)

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
