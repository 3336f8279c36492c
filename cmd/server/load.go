package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/redis"
)

// load runs "server load [--replace] FILE": it writes a fixture into the configured Redis in
// the LaunchDarkly layout, then sets the cursor (the file's, or a new one) and the
// synchronization time (the file's synchronizedOn, or now), so that running instances see the
// load as a change at their next poll. The whole file is checked before anything is written.
func load(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	opts, file, err := parseLoadArgs(args, stderr)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	if cfg.topology() == topologyNone {
		return errors.New("load: no Redis configured: set BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_ADDRS or BIGSEG_REDIS_SENTINEL_ADDRS")
	}
	f, err := fixture.ReadFileContext(ctx, file)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	client, target, err := newRedisClient(cfg)
	if err != nil {
		return err
	}
	defer client.Close()

	synced := time.Now()
	if f.SynchronizedOn != nil {
		synced = *f.SynchronizedOn // the zero time, for 0: never synchronized
	}
	fmt.Fprintf(stderr, "loading %d contexts from %s into %s Redis %v under prefix %q\n",
		len(f.Contexts), file, target.topology, target.addrs, cfg.Prefix)
	lastReport := time.Now()
	opts.SynchronizedOn, opts.Cursor = synced, f.Cursor
	opts.Progress = func(done, total int) {
		if time.Since(lastReport) >= time.Second && done < total {
			fmt.Fprintf(stderr, "loaded %d/%d contexts\n", done, total)
			lastReport = time.Now()
		}
	}
	st, err := redis.New(client, cfg.Prefix).Load(ctx, f.Contexts, opts)
	if err != nil {
		return fmt.Errorf("load: after %d contexts: %w", st.Contexts, err)
	}
	fmt.Fprintf(stdout, "loaded %d contexts: %d refs added, %d refs removed, %d sets of unlisted contexts deleted; synchronized_on %d, cursor %s\n",
		st.Contexts, st.RefsAdded, st.RefsRemoved, st.KeysDeleted, st.SyncedOnMsec, st.Cursor)
	return nil
}

// parseLoadArgs reads load's flags and its one file name.
func parseLoadArgs(args []string, stderr io.Writer) (redis.LoadOptions, string, error) {
	var opts redis.LoadOptions
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&opts.Replace, "replace", false, "make Redis match the file: remove refs it does not list, and the sets of contexts it does not list")
	fs.IntVar(&opts.BatchSize, "batch", 1000, "contexts per pipeline")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: server load [--replace] [--batch N] FILE\n\n"+
			"Writes FILE (the format of examples/memberships.json, at most %d MiB) into the Redis\n"+
			"configured by the BIGSEG_REDIS_* variables, under BIGSEG_PREFIX. Idempotent.\n\n", fixture.MaxBytes>>20)
		fs.PrintDefaults()
	}
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return opts, "", err
	}
	if len(files) != 1 {
		fs.Usage()
		return opts, "", errors.New("load: give exactly one fixture file")
	}
	return opts, files[0], nil
}

// parseInterspersed parses flags wherever they are among the arguments ("load FILE
// --replace" as well as "load --replace FILE"), and returns the other arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return rest, nil
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
