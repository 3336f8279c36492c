package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// moto is a moto_server process (moto's DynamoDB emulator) on a free loopback port. The
// start-up is internal/dynamotest's, which this module cannot import (internal to bigseg's).
type moto struct {
	// url is the server's endpoint, http://127.0.0.1:PORT.
	url string

	cmd    *exec.Cmd
	exited chan struct{}
	log    *tail
}

// errNoMoto is the error of startMoto when moto_server is not on PATH.
var errNoMoto = errors.New("moto_server is not on PATH (pip install 'moto[server]')")

var listening = regexp.MustCompile(`Running on (http://127\.0\.0\.1:[0-9]+)`)

// startMoto starts moto_server on port 0, so that it takes a free port itself, reads the port
// from the line it logs, and returns once it answers a DynamoDB call. argv0, if not empty, is
// a wrapper the command runs under (taskset and its arguments, for the benchmark).
func startMoto(wrapper ...string) (*moto, error) {
	path, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, errNoMoto
	}
	argv := append(append([]string{}, wrapper...), path, "-H", "127.0.0.1", "-p", "0")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	// Its own process group, killed whole (the command may be a wrapper script), and killed
	// with this process if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	m := &moto{cmd: cmd, exited: make(chan struct{}), log: &tail{}}
	found := make(chan string, 1)
	go func() {
		// Drains moto's log (a line a request) until it exits, keeping the last lines.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			m.log.add(sc.Text())
			if sub := listening.FindStringSubmatch(sc.Text()); sub != nil {
				select {
				case found <- sub[1]:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(m.exited)
	}()
	select {
	case m.url = <-found:
	case <-m.exited:
		return nil, fmt.Errorf("moto_server exited before listening:\n%s", m.log)
	case <-time.After(60 * time.Second): // a bound on a hung start, not a wait for time to pass
		m.stop()
		return nil, fmt.Errorf("moto_server did not say where it listens:\n%s", m.log)
	}
	if err := m.ready(); err != nil {
		m.stop()
		return nil, err
	}
	return m, nil
}

// ready polls until the server answers a DynamoDB call.
func (m *moto) ready() error {
	c := newDynamoClient(m.url, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.ListTables(ctx, &awsdynamodb.ListTablesInput{})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("moto_server at %s does not answer: %v\n%s", m.url, err, m.log)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// pid is the process's id (taskset's, which execs moto_server's Python).
func (m *moto) pid() int { return m.cmd.Process.Pid }

// stop kills the server's process group and waits for it to exit; stopping a stopped server
// does nothing.
func (m *moto) stop() {
	select {
	case <-m.exited:
		return
	default:
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.exited
}

// tail keeps the last lines of a log.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (l *tail) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 50 {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, line)
}

func (l *tail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
