package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// server is a bigseg process, pinned, on a Redis.
type server struct {
	cmd  *exec.Cmd
	addr string
}

// startServer starts bin on a free port against redisURL, pinned to cpus, with the inventory's
// interval and rate (interval 0: no scans), and waits until it answers a lookup.
func startServer(ctx context.Context, bin, cpus, redisURL string, interval time.Duration, rate int) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "taskset", "-c", cpus, bin)
	cmd.Env = append(os.Environ(), "BIGSEG_ADDR="+addr, "BIGSEG_REDIS_URL="+redisURL, "BIGSEG_LOG_LEVEL=warn",
		"BIGSEG_INVENTORY_INTERVAL="+interval.String(), "BIGSEG_INVENTORY_READS_PER_SECOND="+strconv.Itoa(rate))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	s := &server{cmd: cmd, addr: addr}
	for range 300 {
		if resp, err := http.Get("http://" + addr + "/memberships/user-1"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("the server on %s did not answer 200", addr)
}

// stop ends the server (taskset execs it, so the pid is the server's) and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// cpuTime is the user plus system CPU time process pid (all its threads) has used, from
// /proc/PID/stat's fields 14 and 15, in ticks of 10 ms.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q %q", pid, f[11], f[12])
	}
	return time.Duration(u+s) * 10 * time.Millisecond, nil
}

// rss is the resident set of process pid, in bytes (VmRSS).
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// inventory is what GET /segments answers, in part.
type inventory struct {
	Contexts int64 `json:"contexts"`
	Segments []struct {
		Ref string `json:"ref"`
	} `json:"segments"`
	Scan struct {
		State      string    `json:"state"`
		StartedAt  time.Time `json:"startedAt"`
		FinishedAt time.Time `json:"finishedAt"`
		LastError  string    `json:"lastError"`
	} `json:"scan"`
}

func (s *server) inventory(ctx context.Context) (inventory, error) {
	var inv inventory
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+"/segments", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return inv, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return inv, fmt.Errorf("GET /segments: %s", resp.Status)
	}
	return inv, json.NewDecoder(resp.Body).Decode(&inv)
}
