package redis_test

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/internal/redistest"
)

func TestMain(m *testing.M) {
	flag.Parse()
	defaultParallel(parallelTests)
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

// parallelTests is how many of this package's parallel tests (those that start Redis servers of
// their own: clusters, a sentinel set; but the two of hung_test.go) run at once unless -parallel says: they wait on those
// servers far more than they compute, so that more than GOMAXPROCS of them (go test's
// default) still fit the cores.
const parallelTests = 8

// defaultParallel sets -test.parallel to n unless the command line set it.
func defaultParallel(n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}
