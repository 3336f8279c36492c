package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bigseg/bigseg/internal/inventory"
	"github.com/bigseg/bigseg/metrics"
	"github.com/bigseg/bigseg/segments"
)

// runInventory runs "server inventory [--environment NAME] [--json]": one scan of each
// environment's store (inventory.Report) at BIGSEG_INVENTORY_READS_PER_SECOND, its counts to
// stdout, its progress to stderr when that is a terminal.
func runInventory(ctx context.Context, args []string, cfg config, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inventory", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("environment", "", "the environment to scan (a name of BIGSEG_ENVIRONMENTS; default: every one)")
	asJSON := fs.Bool("json", false, `print {"environments": [...]} as JSON, not tables`)
	if err := fs.Parse(args); err != nil {
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
	envs := svc.Environments()
	if *name != "" {
		i := slices.IndexFunc(envs, func(e *segments.Environment) bool { return e.Name == *name })
		if i < 0 {
			return fmt.Errorf("inventory: no environment %q", *name)
		}
		envs = envs[i : i+1]
	}
	return inventory.Report(ctx, envs, inventory.Settings{ReadsPerSecond: cfg.InventoryReadsPerSecond}, stdout, stderr, *asJSON)
}
