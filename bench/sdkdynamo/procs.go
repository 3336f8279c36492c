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

	"github.com/gomodule/redigo/redis"
)

// buildBigseg builds bigseg's server from root (the repository, ../.. of this module) into dir.
func buildBigseg(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "server")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/server")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/server: %v\n%s", err, out)
	}
	return bin, nil
}

// proc is a child process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	http string // http://host:port of a bigseg server
	resp string // host:port of its Redis-protocol listener
	log  string
}

// startProc starts argv (under wrapper, such as taskset -c 0, which execs it, so the pid is
// the program's own), its output to the file log.
func startProc(name string, wrapper, env []string, log string, argv ...string) (*proc, error) {
	out, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own copy
	argv = append(append([]string{}, wrapper...), argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	// If this process dies, its servers go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: log}
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

// startBigseg starts the bigseg server bin with settings, its Redis-protocol listener on and
// the AWS settings of vars, and returns once it is ready (its first status poll done) and the
// listener answers PING.
func startBigseg(ctx context.Context, bin string, wrapper []string, dir string, settings ...string) (*proc, error) {
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	respAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := append([]string{"BIGSEG_ADDR=" + httpAddr, "BIGSEG_RESP_ADDR=" + respAddr, "BIGSEG_SHUTDOWN_DELAY=0s",
		"BIGSEG_LOG_LEVEL=warn"}, settings...)
	log := filepath.Join(dir, "bigseg-"+strings.ReplaceAll(respAddr, ":", "-")+".log")
	p, err := startProc("bigseg", wrapper, env, log, bin)
	if err != nil {
		return nil, err
	}
	p.http, p.resp = "http://"+httpAddr, respAddr
	ready := func() error {
		if _, err := httpGet(ctx, p.http+"/readyz"); err != nil {
			return err
		}
		return ping(respAddr)
	}
	if err := waitFor(p, ready); err != nil {
		p.stop()
		out, _ := os.ReadFile(log)
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	return p, nil
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

func ping(addr string) error {
	c, err := redis.Dial("tcp", addr, redis.DialConnectTimeout(2*time.Second), redis.DialReadTimeout(2*time.Second))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Do("PING")
	return err
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
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

// cpuTime is a process's user + system CPU time so far, from /proc/<pid>/stat (in USER_HZ
// ticks, 100 a second on Linux).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	end := strings.LastIndexByte(string(b), ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %.60q", pid, b)
	}
	fields := strings.Fields(string(b[end+1:])) // fields[0] is field 3, the state
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %.60q", pid, b)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / 100, nil
}
