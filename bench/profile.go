package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// namedProfile is the top of a CPU profile of one system.
type namedProfile struct{ system, top string }

// profiles takes a CPU profile of every bigseg and wrapper system in a pass of its own after
// the measured rounds (profiling slows what it profiles), and keeps the top of each.
func (b *bench) profiles(ctx context.Context, systems []*system) error {
	for _, s := range systems {
		if s.proc == nil || s.proc.pprof == "" {
			continue
		}
		logf("profiling %s", s.name)
		if s.scenario == "zipf" && b.o.warmup > 0 {
			if _, err := b.drive(ctx, s, b.o.warmup, 1, 0); err != nil {
				return err
			}
		}
		secs := max(int(b.o.duration.Seconds())-2, 1)
		done := make(chan error, 1)
		var raw []byte
		go func() {
			var err error
			raw, err = cpuProfile(ctx, s.proc.pprof, secs)
			done <- err
		}()
		if _, err := b.drive(ctx, s, b.o.duration, 1, 0); err != nil {
			<-done
			return err
		}
		if err := <-done; err != nil {
			logf("profile of %s: %v", s.name, err)
			continue
		}
		top, err := b.saveProfile(ctx, s, raw)
		if err != nil {
			logf("profile of %s: %v", s.name, err)
			continue
		}
		b.report.profiles = append(b.report.profiles, namedProfile{s.name, top})
	}
	return nil
}

// cpuProfile waits a second for the load to ramp up, then profiles for secs.
func cpuProfile(ctx context.Context, pprofURL string, secs int) ([]byte, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Second):
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", pprofURL, secs), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// saveProfile writes the profile and its `go tool pprof -top` into the output directory.
func (b *bench) saveProfile(ctx context.Context, s *system, raw []byte) (string, error) {
	base := filepath.Join(b.o.outDir, "profile-"+strings.NewReplacer(" ", "-", "@", "-", "/", "-").Replace(s.name))
	if err := os.WriteFile(base+".pprof", raw, 0o644); err != nil {
		return "", err
	}
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=15", base+".pprof").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pprof: %v\n%s", err, top)
	}
	return string(top), os.WriteFile(base+".txt", top, 0o644)
}
