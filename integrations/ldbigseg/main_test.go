package ldbigseg_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, removes the server binary they built, stops the moto_server they
// started, and then fails the run if any goroutine is left: every store, SDK client and
// process helper the tests made must be closed.
func TestMain(m *testing.M) {
	code := m.Run()
	removeServerBinary()
	stopMoto()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
