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
