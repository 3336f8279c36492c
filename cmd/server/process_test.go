package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// process is the real program running as a process of its own (this test binary, in server
// mode: see TestMain), for tests that signal it or measure what it holds.
type process struct {
	cmd    *exec.Cmd
	URL    string
	logs   *logs
	exited chan error
}

// startProcess starts the program with the given BIGSEG_* settings (on top of test defaults,
// nothing inherited) and waits until it listens. It is killed when the test ends, if it is
// still running.
func startProcess(t testing.TB, env map[string]string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{"BIGSEG_TEST_AS_SERVER=1", "PATH=" + os.Getenv("PATH")}
	get := environ(env)
	for _, k := range []string{"BIGSEG_ADDR", "BIGSEG_LOG_LEVEL", "BIGSEG_SHUTDOWN_DELAY", "BIGSEG_SEED_FILE", "BIGSEG_INVENTORY_INTERVAL"} {
		cmd.Env = append(cmd.Env, k+"="+get(k))
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, logs: newLogs(), exited: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.logs.Write(append(sc.Bytes(), '\n'))
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	p.URL = "http://" + p.logs.wait(t, "listening")["addr"].(string)
	return p
}

// signal sends sig to the process.
func (p *process) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait returns how the process exited, or fails the test if it still runs after d.
func (p *process) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-p.exited:
		return err
	case <-time.After(d):
		t.Fatalf("process still running after %s; logs:\n%s", d, p.logs.all())
		return nil
	}
}

// holdings is what the process holds: resident memory, threads and open file descriptors, and
// of these the sockets (which a file the process opens for a moment, as at start-up, is not).
type holdings struct {
	rssBytes, threads, fds, sockets int
}

func (u holdings) String() string {
	return fmt.Sprintf("RSS %d MiB, %d threads, %d fds", u.rssBytes>>20, u.threads, u.fds)
}

// holdings reads the process's /proc entries (Linux).
func (p *process) holdings(t *testing.T) holdings {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(p.cmd.Process.Pid)
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var u holdings
	for line := range strings.Lines(string(status)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "VmRSS:":
			kb, _ := strconv.Atoi(f[1])
			u.rssBytes = kb << 10
		case len(f) >= 2 && f[0] == "Threads:":
			u.threads, _ = strconv.Atoi(f[1])
		}
	}
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	u.fds = len(fds)
	for _, fd := range fds {
		if link, err := os.Readlink(dir + "/fd/" + fd.Name()); err == nil && strings.HasPrefix(link, "socket:") {
			u.sockets++
		}
	}
	return u
}

// runToExit runs the program as a process of its own with args and exactly the BIGSEG_*
// settings of env (no test defaults), and returns its exit code and output once it exits
// (within 20 s).
func runToExit(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = []string{"BIGSEG_TEST_AS_SERVER=1", "PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("%v: %v (%v); stderr:\n%s", args, err, ctx.Err(), errOut.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}
