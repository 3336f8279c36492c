package main

import (
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name         string
		stat         string
		utime, stime int64
		wantErr      bool
	}{
		{"plain", "20881 (cat) R 20879 20879 10130 0 -1 4194304 101 0 0 0 7 3 0 0 20 0 1 0 70163 3133440 389",
			7, 3, false},
		{"name with spaces and parentheses", "42 (a (b) c) S 1 42 42 0 -1 4194560 5000 0 0 0 1234 567 0 0 20 0 9 0 100 1 1",
			1234, 567, false},
		{"no name", "42 S 1 2 3", 0, 0, true},
		{"truncated", "42 (x) S 1 42 42 0 -1 4194560 5000 0 0 0 1234", 0, 0, true},
		{"not a number", "42 (x) S 1 42 42 0 -1 4194560 5000 0 0 0 12a4 567 0", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, s, err := parseStat([]byte(tt.stat))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if u != tt.utime || s != tt.stime {
				t.Errorf("utime, stime = %d, %d; want %d, %d", u, s, tt.utime, tt.stime)
			}
		})
	}
}

func TestCPUTimeOfThisProcess(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the kernel has counted a few ticks more.
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x += i
		}
		if now, _ := cpuTime(os.Getpid()); now-before >= 50*time.Millisecond {
			return
		}
	}
	t.Errorf("CPU time did not grow by 50ms in 5s of spinning (%d)", x)
}
