package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// proc is a process the benchmark started: a server under test or the private Redis.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	url     string // http://host:port of an HTTP server
	lookups string // where its lookup routes are: url, or url/environments/NAME
	pprof   string // http://host:port of its pprof listener, if any
	metrics string // where its /metrics is: url, or bigseg's metrics listener (with pprof)
	resp    string // host:port of its Redis-protocol listener, if any
}

// procSpec says how to start a proc.
type procSpec struct {
	name  string
	cpus  string // taskset's CPU list: the process and everything it starts runs there only
	bin   string
	args  []string
	env   []string // added to the benchmark's own environment
	dir   string   // where its log goes
	ready func(ctx context.Context) error
}

// startProc starts a process pinned to s.cpus and waits until s.ready succeeds. The process
// gets a process group of its own, so that a Ctrl-C reaches the benchmark only, which then
// stops it, and is killed by the kernel if the benchmark dies without doing so.
func startProc(ctx context.Context, s procSpec) (*proc, error) {
	logPath := filepath.Join(s.dir, s.name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command("taskset", append([]string{"-c", s.cpus, s.bin}, s.args...)...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.name, err)
	}
	p := &proc{name: s.name, cmd: cmd, logPath: logPath}
	if err := waitReady(ctx, s.ready); err != nil {
		p.stop()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%s did not get ready: %w\n%s", s.name, err, log)
	}
	return p, nil
}

// waitReady polls ready for up to 30 seconds.
func waitReady(ctx context.Context, ready func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// httpReady is a readiness check: GET url answers 200.
func httpReady(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// pid is the process's id; taskset execs the program, so it is the program's too.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop asks the process to stop (SIGTERM), and kills it if it has not after 10 seconds.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// scrape reads a Prometheus text exposition.
func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// sumMetric sums the samples of a family whose labels include the given name, value pairs:
// counters and gauges by value, histograms by count.
func sumMetric(families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f, ok := families[name]
	if !ok {
		return 0
	}
	sum := 0.0
	for _, m := range f.Metric {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		found := false
		for _, l := range m.Label {
			found = found || l.GetName() == pairs[i] && l.GetValue() == pairs[i+1]
		}
		if !found {
			return false
		}
	}
	return true
}
