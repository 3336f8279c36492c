package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/internal/otlptest"
	"github.com/bigseg/bigseg/internal/redistest"
)

// The whole program runs in-process in these tests: once each has stopped it, nothing of it
// (poller, server, Redis client, streams) may be left running. The tests' own idle HTTP
// client connections are closed first: they are the client's, not the program's.
func TestMain(m *testing.M) {
	if os.Getenv("BIGSEG_TEST_AS_SERVER") == "1" { // the real program, for tests that signal a process
		main()
		os.Exit(0)
	}
	if os.Getenv("BIGSEG_TEST_AS_OTLP_RECEIVER") == "1" { // a collector, for the OpenTelemetry tests
		os.Exit(otlptest.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	flag.Parse()
	defaultParallel(parallelTests)
	code := dynamotest.Main(runner(func() int { return redistest.Main(m) }))
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := findLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// findLeaks is goleak.Find, given up to 3 s for goroutines to end: go-redis's pool probes a
// node it could not dial once a second until its pool is closed, so a closed pool's prober
// may sleep up to a second before it sees that (goleak alone waits about half a second). An
// HTTP client's kept-alive connection (its read and write loops) is not counted: the tests'
// own clients keep some with transports of their own (one was left once in five runs), and
// it ends with its server or its idle timeout; what the program starts is checked.
func findLeaks() error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
}

// parallelTests is how many of this package's parallel tests run at once unless -parallel
// says: most of them wait on processes, timeouts and servers of their own far more than they
// compute, so that more than GOMAXPROCS of them at once (go test's default) still fit the
// cores; and those on the shared moto_server wait for their turn in a slot (parallelOnMoto).
const parallelTests = 16

// defaultParallel sets -test.parallel to n unless the command line set it.
func defaultParallel(n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// runner runs tests by a function: redistest.Main, within dynamotest.Main.
type runner func() int

func (r runner) Run() int { return r() }
