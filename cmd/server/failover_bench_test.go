package main

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
)

// BenchmarkClusterMasterDown measures what a dead master without a replica costs the contexts
// of the other masters: lookups of every context, by 16 clients, against the real binary with
// its cache off; it reports the answers per second of the contexts on live masters with every
// master up, then with one down, and their ratio. The server is pinned to CPU 0 and the load
// to CPU 1 when taskset is there. Run with -benchtime 1x: each run measures 5 s a phase.
func BenchmarkClusterMasterDown(b *testing.B) {
	cluster := redistest.StartCluster(b, 3)
	prefix := "bigsegbench"
	seedCluster(b, cluster.Client(b), prefix)
	p := startProcess(b, map[string]string{
		"BIGSEG_REDIS_CLUSTER_URL": "redis://" + cluster.Addrs()[0], "BIGSEG_PREFIX": prefix, "BIGSEG_CACHE_SIZE": "0",
		"BIGSEG_LOG_LEVEL": "info",
	})
	pinned := pin(b, p.cmd.Process.Pid, "0") && pin(b, os.Getpid(), "1")
	victim := masterWithoutMetadata(b, cluster, prefix)
	onVictim := map[int]bool{}
	for i := range failoverUsers {
		h := segments.Hash("user-" + strconv.Itoa(i))
		onVictim[i] = cluster.MasterOf(b, prefix+":big_segment_include:"+h) == victim ||
			cluster.MasterOf(b, prefix+":big_segment_exclude:"+h) == victim
	}
	const phase = 5 * time.Second
	for range b.N {
		up := liveAnswersPerSecond(p.URL, onVictim, phase)
		victim.Stop()
		down := liveAnswersPerSecond(p.URL, onVictim, phase)
		victim.Restart()
		cluster.WaitOK(b)
		b.ReportMetric(up, "live-ok/s-all-up")
		b.ReportMetric(down, "live-ok/s-one-down")
		b.ReportMetric(down/up, "ratio")
	}
	if !pinned {
		b.Log("taskset is not available: server and load were not pinned")
	}
}

// liveAnswersPerSecond runs 16 clients looking up random contexts for d, and returns the
// answers per second of the contexts not on the dead master.
func liveAnswersPerSecond(base string, onVictim map[int]bool, d time.Duration) float64 {
	load := startLookupLoad(base, 16, onVictim)
	time.Sleep(d) // a measurement of a fixed duration
	close(load.stop)
	load.wg.Wait()
	return float64(load.liveOK.Load()) / d.Seconds()
}

// pin binds every thread of pid to cpu, and says whether it could.
func pin(b *testing.B, pid int, cpu string) bool {
	if _, err := exec.LookPath("taskset"); err != nil {
		return false
	}
	if out, err := exec.Command("taskset", "-a", "-cp", cpu, strconv.Itoa(pid)).CombinedOutput(); err != nil {
		b.Logf("taskset: %v %s", err, out)
		return false
	}
	return true
}
