package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: clock ticks of USER_HZ, which is
// 100 on every Linux that Go runs on (sysconf(_SC_CLK_TCK)). A 6-second measurement of a
// busy server spans hundreds of ticks, so the 10 ms resolution costs well under 1%.
const userHZ = 100

// cpuTime is the user plus system CPU time that process pid (all its threads) has used.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	utime, stime, err := parseStat(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return ticks(utime + stime), nil
}

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// parseStat returns utime and stime (fields 14 and 15, in clock ticks) of a /proc/<pid>/stat
// line. The command name (field 2) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStat(stat []byte) (utime, stime int64, err error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, 0, fmt.Errorf("no command name in %.40q", stat)
	}
	f := bytes.Fields(stat[end+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	if utime, err = strconv.ParseInt(string(f[11]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	if stime, err = strconv.ParseInt(string(f[12]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return utime, stime, nil
}
