package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/bigseg/bigseg/storage/memory"
	"github.com/bigseg/bigseg/storage/redis"
)

// load runs "server load [--replace] FILE": it writes a fixture into the configured Redis in
// the LaunchDarkly layout, then sets the synchronization time (the file's synchronizedOn, or
// now). The whole file is checked before anything is written.
func load(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	replace := fs.Bool("replace", false, "make Redis match the file: remove refs it does not list, and the sets of contexts it does not list")
	batch := fs.Int("batch", 1000, "contexts per pipeline")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: server load [--replace] [--batch N] FILE\n\n"+
			"Writes FILE (the format of examples/memberships.json) into the Redis configured by the\n"+
			"BIGSEG_REDIS_* variables, under BIGSEG_PREFIX. Idempotent.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("load: give exactly one fixture file")
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	if cfg.topology() == topologyNone {
		return errors.New("load: no Redis configured: set BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_ADDRS or BIGSEG_REDIS_SENTINEL_ADDRS")
	}
	f, err := memory.ReadFixtureFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	client, target, err := newRedisClient(cfg)
	if err != nil {
		return err
	}
	defer client.Close()

	contexts := make([]redis.Context, len(f.Contexts))
	for i, c := range f.Contexts {
		contexts[i] = redis.Context{Hash: c.Hash, Included: c.Included, Excluded: c.Excluded}
	}
	synced := time.Now()
	if f.SynchronizedOn != nil {
		synced = *f.SynchronizedOn
	}
	fmt.Fprintf(stderr, "loading %d contexts from %s into %s Redis %v under prefix %q\n",
		len(contexts), fs.Arg(0), target.topology, target.addrs, cfg.Prefix)
	lastReport := time.Now()
	st, err := redis.New(client, cfg.Prefix).Load(ctx, contexts, redis.LoadOptions{
		Replace:        *replace,
		SynchronizedOn: synced,
		BatchSize:      *batch,
		Progress: func(done, total int) {
			if time.Since(lastReport) >= time.Second && done < total {
				fmt.Fprintf(stderr, "loaded %d/%d contexts\n", done, total)
				lastReport = time.Now()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("load: after %d contexts: %w", st.Contexts, err)
	}
	fmt.Fprintf(stdout, "loaded %d contexts: %d refs added, %d refs removed, %d sets of unlisted contexts deleted; synchronized_on %d\n",
		st.Contexts, st.RefsAdded, st.RefsRemoved, st.KeysDeleted, st.SyncedOnMsec)
	return nil
}
