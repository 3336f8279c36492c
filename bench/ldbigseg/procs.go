package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// proc is a child process pinned to a CPU with taskset.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// startPinned starts argv under "taskset -c cpu" (taskset execs the program, so the pid is the
// program's own and its /proc CPU times are the program's).
func startPinned(name string, cpu int, env []string, stderr *os.File, argv ...string) (*proc, error) {
	cmd := exec.Command("taskset", append([]string{"-c", strconv.Itoa(cpu)}, argv...)...)
	cmd.Env = env
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	// If the benchmark dies, its servers go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop sends SIGTERM and waits, killing after 10 s.
func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// cpuTime is the process's user + system CPU time so far, from /proc/<pid>/stat.
func (p *proc) cpuTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

// allowedCPUs is this process's CPU affinity, as /proc says it.
func allowedCPUs() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startRedis starts a private redis-server on a free loopback port, pinned to cpu.
func startRedis(cpu int, dir string, logTo *os.File) (*proc, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	p, err := startPinned("redis-server", cpu, nil, logTo, "redis-server", "--port", strconv.Itoa(port),
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			p.stop()
			return nil, "", fmt.Errorf("redis-server on %s did not answer within 10s", addr)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	return p, addr, nil
}

// startBigseg starts the bigseg server pinned to cpu with settings, and returns its base URL
// once its first status poll has completed.
func startBigseg(bin string, cpu int, dir string, settings ...string) (*proc, string, error) {
	logPath := filepath.Join(dir, fmt.Sprintf("bigseg-%d.log", time.Now().UnixNano()))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	defer logFile.Close()
	env := append([]string{"BIGSEG_ADDR=127.0.0.1:0", "BIGSEG_SHUTDOWN_DELAY=0s"}, settings...)
	p, err := startPinned("bigseg", cpu, env, logFile, bin)
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if addr := listeningAddr(logPath); addr != "" {
			base := "http://" + addr
			if err := waitPolled(base, deadline); err != nil {
				p.stop()
				return nil, "", err
			}
			return p, base, nil
		}
		select {
		case <-p.done:
			return nil, "", fmt.Errorf("bigseg exited; see %s", logPath)
		default:
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, "", fmt.Errorf("bigseg did not listen within 30s; see %s", logPath)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

func listeningAddr(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct{ Msg, Addr string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "listening" {
			return l.Addr
		}
	}
	return ""
}

func waitPolled(base string, deadline time.Time) error {
	for {
		resp, err := http.Get(base + "/status")
		if err == nil {
			var st struct {
				Available bool    `json:"available"`
				CheckedAt *string `json:"checkedAt"`
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err == nil && st.CheckedAt != nil && st.Available {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bigseg at %s not available within 30s: %v", base, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}
