package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// proc is a server process under test.
type proc struct {
	name  string
	url   string
	pprof string
	cmd   *exec.Cmd
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startProc starts bin with env and args, and waits until path answers 200.
func startProc(ctx context.Context, name, bin string, env []string, args []string, addr, ready string) (*proc, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	logFile, err := os.CreateTemp("", "bigseg-bench-"+name+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: name, url: "http://" + addr, cmd: cmd}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(p.url + ready)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			log, _ := os.ReadFile(logFile.Name())
			return nil, fmt.Errorf("%s did not get ready: %v\n%s", name, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *proc) stop() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
}

// metric sums the samples of a metric whose labels include the given pairs.
func (p *proc) metric(name string, labels ...string) (float64, error) {
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	f, ok := families[name]
	if !ok {
		return 0, nil
	}
	sum := 0.0
	for _, m := range f.Metric {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum, nil
}

// commandCalls returns Redis's INFO commandstats call count for one command.
func commandCalls(ctx context.Context, d *dataset, cmd string) (int64, error) {
	info, err := d.client.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			return n, nil
		}
	}
	return 0, nil
}
