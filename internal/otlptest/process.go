package otlptest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Main runs a receiver as a program: flags -grpc and -http (addresses, default free loopback
// ports), -fault (ok, unavailable, hang, garbage) and -delay (a Go duration). It writes every
// Record to stdout as a JSON line, the addresses first, and runs until its standard input
// ends (the test that started it closed it, or died) or it is sent SIGTERM or SIGINT. It
// returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("otlpreceiver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	grpcAddr := fs.String("grpc", "127.0.0.1:0", "gRPC `address` (OTLP/gRPC)")
	httpAddr := fs.String("http", "127.0.0.1:0", "HTTP `address` (OTLP/HTTP: /v1/traces, /v1/metrics)")
	faultName := fs.String("fault", "ok", "how to answer: ok, unavailable, hang or garbage")
	delay := fs.Duration("delay", 0, "how long to wait before each answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fault, err := ParseFault(*faultName)
	if err != nil {
		fmt.Fprintln(stderr, "otlpreceiver:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	r, err := Start(Options{GRPCAddr: *grpcAddr, HTTPAddr: *httpAddr, Fault: fault, Delay: *delay, Out: stdout})
	if err != nil {
		fmt.Fprintln(stderr, "otlpreceiver:", err)
		return 1
	}
	defer r.Close()
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(ended)
	}()
	select {
	case <-ctx.Done():
	case <-ended:
	}
	return 0
}

// Process is a receiver running as a program of its own (Main), its records read back from its
// output.
type Process struct {
	*Received
	GRPCAddr, HTTPAddr string

	cmd    *exec.Cmd
	stdin  io.Closer
	exited chan struct{}
	err    error // how it exited, once exited is closed

	mu     sync.Mutex
	stderr []byte
}

// StartProcess starts cmd, a program that runs Main (its Stdin, Stdout and Stderr must be
// unset: StartProcess takes them), and waits up to a minute for its addresses.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	p := &Process{Received: newReceived(), cmd: cmd, exited: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.stderr = append(p.stderr, b...)
		return len(b), nil
	})
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	first := make(chan Record, 1)
	go p.read(stdout, first)
	select {
	case rec := <-first:
		p.GRPCAddr, p.HTTPAddr = rec.GRPC, rec.HTTP
		if p.GRPCAddr == "" || p.HTTPAddr == "" {
			p.Kill()
			return nil, errNoAddrs
		}
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("the receiver exited before listening (%v): %s", p.err, p.Stderr())
	case <-time.After(time.Minute):
		p.Kill()
		return nil, fmt.Errorf("the receiver did not listen within a minute: %s", p.Stderr())
	}
}

// read reads the process's records until its output ends, sends the first on first, then
// waits for the process.
func (p *Process) read(stdout io.Reader, first chan<- Record) {
	br := bufio.NewReader(stdout)
	sent := false
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var rec Record
			if jerr := json.Unmarshal(line, &rec); jerr == nil && p.add(rec) == nil && !sent {
				first <- rec
				sent = true
			}
		}
		if err != nil {
			break
		}
	}
	p.err = p.cmd.Wait()
	close(p.exited)
}

// Stderr returns what the process wrote to its standard error.
func (p *Process) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return string(p.stderr)
}

// Stop ends the process by closing its standard input, as Main expects, and waits for it (up to
// 30 s, then kills it).
func (p *Process) Stop() error {
	p.stdin.Close()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(30 * time.Second):
		p.Kill()
		return errors.New("the receiver did not stop within 30s: killed")
	}
}

// Kill kills the process (a collector that dies) and waits for it.
func (p *Process) Kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
