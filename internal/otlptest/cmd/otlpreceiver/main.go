// Command otlpreceiver is an OTLP receiver for tests (package otlptest): it listens over gRPC
// and HTTP, writes every export it receives as a JSON line (protojson) on standard output, and
// can answer unavailable, hang, be slow or answer garbage.
//
//	otlpreceiver [-grpc addr] [-http addr] [-fault ok|unavailable|hang|garbage] [-delay d]
//
// It runs until its standard input ends or it is sent SIGTERM.
package main

import (
	"os"

	"github.com/bigseg/bigseg/internal/otlptest"
)

func main() {
	os.Exit(otlptest.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
