package main

import (
	"testing"

	"go.uber.org/goleak"
)

// The whole program runs in-process in these tests: once each has stopped it, nothing of it
// (poller, server, Redis client, streams) may be left running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
