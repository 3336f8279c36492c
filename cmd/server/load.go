package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/fixture"
	"github.com/bigseg/bigseg/storage/redis"
)

// loadFlags are load's flags that both stores take.
type loadFlags struct {
	replace bool
	batch   int
}

// load runs "server load [--replace] FILE": it writes a fixture into the configured Redis or
// DynamoDB table in the LaunchDarkly layout, then sets the synchronization time (the file's
// synchronizedOn, or now) and, if the load changed anything, the cursor (the file's, or a new
// one; DynamoDB's lastVersion), so that running instances see the load as a change at their
// next poll. A load that changes nothing keeps the stored cursor: a new one would empty every
// running instance's cache. The whole file is checked before anything is written. Each phase
// (reading, parsing, writing, deleting) prints its progress to stderr about once a second, by
// now, which also gives the synchronization time, and a last line.
func load(ctx context.Context, args []string, cfg config, stdout, stderr io.Writer, now func() time.Time) error {
	flags, envName, file, err := parseLoadArgs(args, stderr)
	if err != nil {
		return err
	}
	prefix, err := cfg.environmentPrefix(envName)
	if err != nil {
		return err
	}
	if !cfg.hasRedis() && !cfg.hasDynamoDB() {
		return errors.New("load: no store configured: set BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_URL, BIGSEG_REDIS_SENTINEL_URL or BIGSEG_DYNAMODB_TABLE")
	}
	f, err := fixture.ReadFileContext(ctx, file, fixture.WithProgress(fileProgress(stderr, now, file)))
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	synced := now()
	if f.SynchronizedOn != nil {
		synced = *f.SynchronizedOn // the zero time, for 0: never synchronized
	}
	if cfg.hasDynamoDB() {
		return loadDynamoDB(ctx, cfg.DynamoDBTable, prefix, f, flags, synced, file, stdout, stderr, now)
	}
	ro, err := cfg.redisOptions()
	if err != nil {
		return err
	}
	client, err := redis.NewClient(ro)
	if err != nil {
		return err
	}
	defer client.Close()

	fmt.Fprintf(stderr, "loading %d contexts from %s into %s Redis %v under prefix %q\n",
		len(f.Contexts), file, ro.Topology(), ro.Addrs(), prefix)
	st, err := redis.New(client, prefix).Load(ctx, f.Contexts, loadOptions(f, flags, synced, loadProgress(stderr, now, redisDeletions)))
	if err != nil {
		return fmt.Errorf("load: after %d contexts: %w", st.Contexts, err)
	}
	warnCursorKept(stderr, f.Cursor, st)
	fmt.Fprintf(stdout, "loaded %d contexts: %d refs added, %d refs removed, %d sets of unlisted contexts deleted; synchronized_on %d, %s\n",
		st.Contexts, st.RefsAdded, st.RefsRemoved, st.Deleted, st.SyncedOnMsec, cursorSummary(st, f.Cursor))
	return nil
}

// loadOptions are the options of a load of f, with flags, synchronized at synced.
func loadOptions(f *fixture.Fixture, flags loadFlags, synced time.Time, progress func(fixture.LoadProgress)) fixture.LoadOptions {
	return fixture.LoadOptions{Replace: flags.replace, BatchSize: flags.batch, SynchronizedOn: synced, Cursor: f.Cursor, Progress: progress}
}

// loadDynamoDB writes f into table under prefix, on a client of the AWS SDK's own settings
// that retries throttling longer than lookups do: a bulk write should slow down, not fail.
func loadDynamoDB(ctx context.Context, table, prefix string, f *fixture.Fixture, flags loadFlags, synced time.Time,
	file string, stdout, stderr io.Writer, now func() time.Time) error {
	client, err := dynamodb.NewClient(ctx, dynamodb.ClientOptions{MaxAttempts: 10, MaxBackoff: 2 * time.Second})
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer client.Close()
	fmt.Fprintf(stderr, "loading %d contexts from %s into DynamoDB table %s (region %s) under prefix %q\n",
		len(f.Contexts), file, table, client.Region(), prefix)
	st, err := dynamodb.New(client, table, prefix).Load(ctx, f.Contexts, loadOptions(f, flags, synced, loadProgress(stderr, now, dynamoDBDeletions)))
	if err != nil {
		return fmt.Errorf("load: after %d contexts: %w", st.Contexts, err)
	}
	warnCursorKept(stderr, f.Cursor, st)
	fmt.Fprintf(stdout, "loaded %d contexts: %d refs added, %d refs removed, %d items of unlisted contexts deleted (and %d empty ones); synchronizedOn %d, %s\n",
		st.Contexts, st.RefsAdded, st.RefsRemoved, st.Deleted, st.EmptyDeleted, st.SyncedOnMsec, cursorSummary(st, f.Cursor))
	return nil
}

// warnCursorKept warns when the data changed but the file's cursor was stored already.
func warnCursorKept(stderr io.Writer, fileCursor string, st fixture.LoadStats) {
	if fileCursor != "" && !st.CursorChanged && st.Changed() {
		fmt.Fprintf(stderr, "warning: the data changed, but the file's cursor is the one stored already: running instances keep the answers they cached until they expire\n")
	}
}

// cursorSummary says which cursor the load left, and why: whether running instances drop
// their cached answers depends on it.
func cursorSummary(st fixture.LoadStats, fileCursor string) string {
	switch {
	case st.CursorChanged && fileCursor != "":
		return fmt.Sprintf("cursor %s (the file's, new)", st.Cursor)
	case st.CursorChanged && st.Changed():
		return fmt.Sprintf("cursor %s (new: the data changed)", st.Cursor)
	case st.CursorChanged:
		return fmt.Sprintf("cursor %s (new: the stored one was not a valid cursor)", st.Cursor)
	case fileCursor != "":
		return fmt.Sprintf("cursor %s unchanged (the file's, stored already)", st.Cursor)
	case st.Cursor == "":
		return "no cursor, unchanged (nothing changed)"
	}
	return fmt.Sprintf("cursor %s unchanged (nothing changed)", st.Cursor)
}

// fileProgress returns the progress report of reading then parsing file, which prints it.
func fileProgress(w io.Writer, now func() time.Time, file string) func(fixture.Progress) {
	read, parse := startMeter(w, now), (*meter)(nil)
	return func(p fixture.Progress) {
		switch {
		case p.Stage == fixture.Reading && p.Done:
			read.done("read %s from %s", mib(p.Bytes), file)
			parse = startMeter(w, now)
		case p.Stage == fixture.Reading && p.Total > 0:
			read.report("read %s of %s", mib(p.Bytes), mib(p.Total))
		case p.Stage == fixture.Reading:
			read.report("read %s", mib(p.Bytes))
		case p.Done:
			parse.done("parsed %d contexts", p.Contexts)
		default:
			parse.report("parsed %d contexts (%s of %s)", p.Contexts, mib(p.Bytes), mib(p.Total))
		}
	}
}

// deletions is how a store's Deleting phase is told: what it deletes, and what it looks at.
type deletions struct {
	done, running func(p fixture.LoadProgress) string
}

var (
	redisDeletions = deletions{
		done: func(p fixture.LoadProgress) string {
			return fmt.Sprintf("deleted %d sets of unlisted contexts (%d keys scanned)", p.Deleted, p.Scanned)
		},
		running: func(p fixture.LoadProgress) string {
			return fmt.Sprintf("deleting sets of unlisted contexts: %d keys scanned, %d deleted", p.Scanned, p.Deleted)
		},
	}
	dynamoDBDeletions = deletions{
		done: func(p fixture.LoadProgress) string {
			return fmt.Sprintf("deleted %d items of unlisted contexts, %d empty ones (%d items queried)", p.Deleted, p.EmptyDeleted, p.Scanned)
		},
		running: func(p fixture.LoadProgress) string {
			return fmt.Sprintf("deleting items of unlisted contexts: %d items queried, %d deleted", p.Scanned, p.Deleted+p.EmptyDeleted)
		},
	}
)

// loadProgress returns the progress report of writing then deleting, which prints it.
func loadProgress(w io.Writer, now func() time.Time, del deletions) func(fixture.LoadProgress) {
	write, deleting := startMeter(w, now), (*meter)(nil)
	return func(p fixture.LoadProgress) {
		switch {
		case p.Phase == fixture.Writing && p.Done:
			write.done("loaded %d/%d contexts (%d refs added, %d removed)", p.Contexts, p.Total, p.RefsAdded, p.RefsRemoved)
			deleting = startMeter(w, now)
		case p.Phase == fixture.Writing:
			write.report("loaded %d/%d contexts (%d refs added, %d removed)", p.Contexts, p.Total, p.RefsAdded, p.RefsRemoved)
		case p.Done:
			deleting.done("%s", del.done(p))
		default:
			deleting.report("%s", del.running(p))
		}
	}
}

// progressEvery is how often a phase of a load prints its progress, at most.
const progressEvery = time.Second

// meter prints the progress of one phase: a line at most every progressEvery by its clock,
// from the first, and a last line with how long the phase took.
type meter struct {
	w     io.Writer
	now   func() time.Time
	start time.Time
	next  time.Time // when the next line is due
}

func startMeter(w io.Writer, now func() time.Time) *meter {
	t := now()
	return &meter{w: w, now: now, start: t, next: t.Add(progressEvery)}
}

// report prints a line if one is due.
func (m *meter) report(format string, args ...any) {
	if t := m.now(); !t.Before(m.next) {
		fmt.Fprintf(m.w, format+"\n", args...)
		m.next = t.Add(progressEvery)
	}
}

// done prints the phase's last line.
func (m *meter) done(format string, args ...any) {
	fmt.Fprintf(m.w, format+" in %v\n", append(args, m.now().Sub(m.start).Round(time.Millisecond))...)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// parseLoadArgs reads load's flags: its options, the environment named, and its one file.
func parseLoadArgs(args []string, stderr io.Writer) (flags loadFlags, env, file string, err error) {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&flags.replace, "replace", false, "make the store match the file: remove refs it does not list, and the sets (DynamoDB: items) of contexts it does not list")
	fs.IntVar(&flags.batch, "batch", 1000, "contexts per pipeline (DynamoDB: read, then written, per batch)")
	fs.StringVar(&env, "environment", "", "the environment to write (a name of BIGSEG_ENVIRONMENTS; needed when there are several)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: server load [--replace] [--batch N] [--environment NAME] FILE\n\n"+
			"Writes FILE (the format of examples/memberships.json, at most %d MiB) into the Redis\n"+
			"configured by the BIGSEG_REDIS_* variables, or the table of BIGSEG_DYNAMODB_TABLE, under\n"+
			"BIGSEG_PREFIX (or the prefix of the environment named), and sets that environment's\n"+
			"cursor. Idempotent.\n\n", fixture.MaxBytes>>20)
		fs.PrintDefaults()
	}
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return flags, "", "", err
	}
	if len(files) != 1 {
		fs.Usage()
		return flags, "", "", errors.New("load: give exactly one fixture file")
	}
	return flags, env, files[0], nil
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
