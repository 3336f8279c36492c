//go:build unix

package ldbigseg_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used, in user and system mode, on all its threads
// (the garbage collector's too): on a shared machine, a steadier figure than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
