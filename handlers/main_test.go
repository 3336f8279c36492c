package handlers

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/internal/redistest"
)

// Status streams and the lookups behind handlers start goroutines: none may outlive a test.
func TestMain(m *testing.M) {
	code := redistest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
