package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a child process pinned to a CPU with taskset.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	http string // http://host:port of a bigseg server
}

// startPinned starts argv under "taskset -c cpu" (taskset execs the program, so the pid is the
// program's own and its /proc CPU times are the program's), its output to log.
func startPinned(name string, cpu int, env []string, log string, argv ...string) (*proc, error) {
	out, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own copy
	cmd := exec.Command("taskset", append([]string{"-c", strconv.Itoa(cpu)}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	// If the benchmark dies, its servers go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop sends SIGTERM and waits, killing after 10 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// cpuTime is the process's user + system CPU time so far, from /proc/<pid>/stat (in USER_HZ
// ticks, 100 a second on Linux).
func (p *proc) cpuTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	end := strings.LastIndexByte(string(b), ')')
	fields := strings.Fields(string(b[end+1:])) // fields[0] is field 3, the state
	if end < 0 || len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %.60q", p.cmd.Process.Pid, b)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / 100, nil
}

func cpuOf(procs []*proc) (time.Duration, error) {
	var sum time.Duration
	for _, p := range procs {
		d, err := p.cpuTime()
		if err != nil {
			return 0, fmt.Errorf("CPU time of %s: %w", p.name, err)
		}
		sum += d
	}
	return sum, nil
}

// processCPU is this process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startRedis starts a private redis-server on a free loopback port, pinned to cpu, keeping
// nothing on disk.
func startRedis(cpu int, dir string) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	_, port, _ := strings.Cut(addr, ":")
	p, err := startPinned("redis-server", cpu, nil, filepath.Join(dir, "redis.log"), "redis-server", "--port", port,
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return nil, "", err
	}
	if err := waitFor(p, func() error { return ping(addr) }); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, addr, nil
}

// startBigseg starts the bigseg server pinned to cpu with settings and its Redis-protocol
// listener on, and returns once it is ready (its first status poll done) and the listener
// answers PING.
func startBigseg(ctx context.Context, bin string, cpu int, dir string, settings ...string) (*proc, string, error) {
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	respAddr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	env := append([]string{"BIGSEG_ADDR=" + httpAddr, "BIGSEG_RESP_ADDR=" + respAddr, "BIGSEG_SHUTDOWN_DELAY=0s",
		"BIGSEG_LOG_LEVEL=warn"}, settings...)
	log := filepath.Join(dir, "bigseg-"+strings.ReplaceAll(respAddr, ":", "-")+".log")
	p, err := startPinned("bigseg", cpu, env, log, bin)
	if err != nil {
		return nil, "", err
	}
	p.http = "http://" + httpAddr
	ready := func() error {
		if _, err := httpGet(ctx, p.http+"/readyz"); err != nil {
			return err
		}
		return ping(respAddr)
	}
	if err := waitFor(p, ready); err != nil {
		p.stop()
		out, _ := os.ReadFile(log)
		return nil, "", fmt.Errorf("%w\n%s", err, out)
	}
	return p, respAddr, nil
}

// waitFor polls ready for up to 30 s, or until p exits.
func waitFor(p *proc, ready func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v", p.name, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within 30 s: %w", p.name, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, err
}

// respCommands is the commands bigseg's listener has answered (bigseg_resp_commands_total,
// summed), or 0 without a bigseg server.
func respCommands(ctx context.Context, p *proc) (float64, error) {
	if p == nil {
		return 0, nil
	}
	body, err := httpGet(ctx, p.http+"/metrics")
	if err != nil {
		return 0, err
	}
	return sumRESPCommands(string(body))
}

// sumRESPCommands sums the samples of bigseg_resp_commands_total in a text exposition.
func sumRESPCommands(exposition string) (float64, error) {
	sum := 0.0
	for line := range strings.Lines(exposition) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "bigseg_resp_commands_total{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("bigseg_resp_commands_total: %w", err)
			}
			sum += f
		}
	}
	return sum, nil
}

// allowedCPUs is this process's CPU affinity, as /proc says it.
func allowedCPUs() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// loadAverage is /proc/loadavg's first three figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
