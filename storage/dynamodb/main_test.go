package dynamodb_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/internal/dynamotest"
)

func TestMain(m *testing.M) {
	code := dynamotest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
