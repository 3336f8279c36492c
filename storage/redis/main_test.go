package redis_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/internal/redistest"
)

func TestMain(m *testing.M) {
	code := redistest.Main(m)
	if code == 0 {
		// go-redis drops a cluster state's unused nodes a minute after making it, on a timer
		// of its own (osscluster.go, newClusterState), and a pool whose dials all failed
		// (a killed node's) tries one a second until it is closed, ending in the second after
		// (pool.go, tryDial): not goroutines of ours.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.newClusterState.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
