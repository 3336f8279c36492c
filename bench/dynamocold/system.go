package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// system is one server under test, with the counting proxy between it and moto.
type system struct {
	name, note string
	argv, env  []string
	addrFlag   bool // the address is given as -addr, not BIGSEG_ADDR

	addr  string
	cmd   *exec.Cmd
	proxy *proxy
	log   *os.File
}

// start starts the server pinned to cpu, on a free port, reaching moto through a proxy of its
// own, and waits until it answers a lookup with the fixture's memberships.
func (s *system) start(dir, motoURL, table, cpu string) error {
	p, err := startProxy(motoURL)
	if err != nil {
		return err
	}
	s.proxy = p
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.addr = l.Addr().String()
	l.Close()
	argv := append([]string{"-c", cpu}, s.argv...)
	if s.addrFlag {
		argv = append(argv, "-addr", s.addr)
	}
	s.cmd = exec.Command("taskset", argv...)
	s.cmd.Env = append(append(os.Environ(), awsVars(p.url, table, dir)...),
		append([]string{"BIGSEG_ADDR=" + s.addr, "BIGSEG_LOG_LEVEL=error", "BIGSEG_SHUTDOWN_DELAY=0s", "GOMAXPROCS=1"}, s.env...)...)
	if s.log, err = os.Create(dir + "/" + s.name + ".log"); err != nil {
		return err
	}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		body, err := get("http://" + s.addr + "/memberships/user-5")
		if err == nil {
			if !strings.Contains(body, `"beta-users.g3":true`) || !strings.Contains(body, `"blocked.g1":false`) {
				return fmt.Errorf("%s answered user-5 without the fixture's memberships: %s", s.name, body)
			}
			return nil
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(s.log.Name())
			return fmt.Errorf("%s did not answer: %v\n%s", s.name, err, out)
		}
	}
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), err
}

func (s *system) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
	}
	if s.proxy != nil {
		s.proxy.close()
	}
	if s.log != nil {
		s.log.Close()
	}
}

// result is one system's share of a round.
type result struct {
	lookups, errors int64
	elapsed         time.Duration
	serverCPU       time.Duration
	motoCPU         time.Duration
	dynamo          counts
}

func (r result) perSecond() float64 { return float64(r.lookups) / r.elapsed.Seconds() }

// perLookup is d per lookup, in µs.
func (r result) perLookup(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(r.lookups)
}

// perThousand is n per 1,000 lookups.
func (r result) perThousand(n int64) float64 { return 1000 * float64(n) / float64(r.lookups) }

// measure drives the system for d from conns connections and reads what it cost.
func (s *system) measure(ctx context.Context, motoPID, conns, keys int, d time.Duration) (result, error) {
	s0, m0, p0 := cpuTime(s.cmd.Process.Pid), cpuTime(motoPID), s.proxy.snapshot()
	start := time.Now()
	lookups, errs, err := drive(ctx, s.addr, conns, keys, start.Add(d))
	elapsed := time.Since(start)
	s1, m1, p1 := cpuTime(s.cmd.Process.Pid), cpuTime(motoPID), s.proxy.snapshot()
	if err != nil {
		return result{}, err
	}
	if lookups == 0 {
		return result{}, errors.New("no lookup answered")
	}
	return result{lookups: lookups, errors: errs, elapsed: elapsed,
		serverCPU: s1 - s0, motoCPU: m1 - m0, dynamo: p1.sub(p0)}, nil
}

// drive sends GET /memberships/user-i, i counting up over every connection (modulo keys),
// from conns keep-alive connections until deadline, and returns the lookups answered 200 and
// the others; a broken connection ends it with an error.
func drive(ctx context.Context, addr string, conns, keys int, deadline time.Time) (ok, bad int64, err error) {
	var next, nOK, nBad atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				errc <- err
				return
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := next.Add(1) - 1
				if _, err := fmt.Fprintf(conn, "GET /memberships/user-%d HTTP/1.1\r\nHost: bench\r\n\r\n", i%int64(keys)); err != nil {
					errc <- err
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					errc <- err
					return
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					errc <- err
					return
				}
				if resp.StatusCode == http.StatusOK {
					nOK.Add(1)
				} else {
					nBad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, 0, err
	}
	return nOK.Load(), nBad.Load(), ctx.Err()
}

// cpuTime is a process's user and system time (every thread's), from /proc; 0 if unreadable.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ, 100 on Linux
}
