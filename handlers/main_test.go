package handlers

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/internal/redistest"
)

// Status streams and the lookups behind handlers start goroutines: none may outlive a test.
// A moto_server started by a test is stopped (dynamotest.Main) before goroutines are counted.
func TestMain(m *testing.M) {
	code := dynamotest.Main(runner(func() int { return redistest.Main(m) }))
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// runner runs tests by a function: redistest.Main, within dynamotest.Main.
type runner func() int

func (r runner) Run() int { return r() }
