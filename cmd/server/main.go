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
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bigseg:", err)
		os.Exit(1)
	}
}

// run is the whole program; main only gives it the process's context and streams, so that
// tests can run it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 1 {
		switch args[1] {
		case "-h", "-help", "--help", "help":
			return usage(stdout)
		case "load":
			return load(ctx, args[2:], stdout, stderr)
		case "healthcheck":
			return healthcheck(ctx, args[2:], stdout, stderr)
		default:
			return fmt.Errorf("unknown command %q (try -h)", args[1])
		}
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	return serve(ctx, cfg, stderr)
}
