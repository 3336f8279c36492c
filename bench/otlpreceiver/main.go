// Command otlpreceiver is the tests' OTLP receiver (the server module's internal/otlptest) as a
// program, for measurements by hand (BENCHMARKS.md: what exporting every span costs): it
// listens over gRPC and HTTP, writes every export it receives as a JSON line (protojson) on
// standard output, and can answer unavailable, hang, be slow or answer garbage. The tests do
// not need it: they run the same receiver in their own process, or re-execute their test
// binary as one.
//
//	go run ./otlpreceiver [-grpc addr] [-http addr] [-fault ok|unavailable|hang|garbage] [-delay d]
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
