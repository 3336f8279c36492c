package main

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The whole program runs in-process in these tests: once each has stopped it, nothing of it
// (poller, server, Redis client, streams) may be left running. The tests' own idle HTTP
// client connections are closed first: they are the client's, not the program's.
func TestMain(m *testing.M) {
	if os.Getenv("BIGSEG_TEST_AS_SERVER") == "1" { // the real program, for tests that signal a process
		main()
		os.Exit(0)
	}
	code := m.Run()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
