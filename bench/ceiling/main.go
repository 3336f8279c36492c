// Command ceiling is the benchmark's two ceilings, what bigseg is measured against on the same
// machine in the same run:
//
//	ceiling http -addr ADDR -body-file FILE [-header 'Name: value' ...]
//
// is the HTTP stack's limit: a bare chi server answering bigseg's lookup route with a fixed
// body and headers copied from a real bigseg answer, on bigseg's http.Server settings, doing
// nothing else;
//
//	ceiling redis -redis URL -prefix P -contexts N [-workers 64] [-duration 6s] [-seed S]
//
// is Redis's: a minimal go-redis client making the reads bigseg makes on a cache miss (two
// SMEMBERS, pipelined) for random contexts from a number of goroutines, which prints wrk's
// summary line (BENCHJSON) when done.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: ceiling http|redis [flags]")
	}
	switch args[0] {
	case "http":
		return serveHTTP(ctx, args[1:], stderr)
	case "redis":
		return loadRedis(ctx, args[1:], stdout, stderr)
	}
	return fmt.Errorf("unknown ceiling %q: want http or redis", args[0])
}
