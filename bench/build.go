package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// binaries are the programs a run builds.
type binaries struct {
	server, ceiling, wrapper, respload string
	baseline, baselineSrc              string // the baseline's server and source tree
	baselineCommit                     string
}

// build builds the current tree's server, the ceilings and the wrapper, and with -baseline
// the server at that revision in a temporary git worktree, which the returned func removes.
func build(ctx context.Context, o options, tmp string) (binaries, func(), error) {
	bins := binaries{server: filepath.Join(tmp, "server"), ceiling: filepath.Join(tmp, "ceiling"),
		wrapper: filepath.Join(tmp, "ldwrapper"), respload: filepath.Join(tmp, "respload")}
	logf("building the server, the ceilings and the LaunchDarkly wrapper")
	steps := []struct{ dir, out, pkg string }{
		{".", bins.server, "./cmd/server"},
		{"bench", bins.ceiling, "./ceiling"}, // bench/ is a module of its own
		{"bench", bins.respload, "./respload"},
		{"bench/ldwrapper", bins.wrapper, "."}, // and so is the wrapper
	}
	for _, s := range steps {
		if err := goBuild(ctx, s.dir, s.out, s.pkg); err != nil {
			return bins, func() {}, err
		}
	}
	if o.baseline == "" {
		return bins, func() {}, nil
	}
	return buildBaseline(ctx, o.baseline, tmp, bins)
}

func goBuild(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, b)
	}
	return nil
}

// buildBaseline checks rev out in a detached worktree and builds its server there; a rev
// ending in ".patch" is a patch file (bench/ab/), applied to HEAD. The worktree stays for the
// memory benchmark until the returned func removes it.
func buildBaseline(ctx context.Context, rev, tmp string, bins binaries) (binaries, func(), error) {
	patch := ""
	if strings.HasSuffix(rev, ".patch") {
		abs, err := filepath.Abs(rev)
		if err != nil {
			return bins, func() {}, err
		}
		patch, rev = abs, "HEAD"
	}
	commit, err := git(ctx, "rev-parse", "--short", rev+"^{commit}")
	if err != nil {
		return bins, func() {}, err
	}
	dir := filepath.Join(tmp, "baseline")
	with := ""
	if patch != "" {
		with = " with " + filepath.Base(patch)
	}
	logf("building bigseg@%s (%s)%s in a temporary worktree", rev, commit, with)
	if _, err := git(ctx, "worktree", "add", "--detach", dir, commit); err != nil {
		return bins, func() {}, err
	}
	remove := func() {
		if _, err := git(context.Background(), "worktree", "remove", "--force", dir); err != nil {
			logf("removing the baseline worktree: %v", err)
		}
	}
	if patch != "" {
		if _, err := git(ctx, "-C", dir, "apply", patch); err != nil {
			remove()
			return bins, func() {}, err
		}
		commit += "+" + filepath.Base(patch)
	}
	bins.baseline, bins.baselineSrc, bins.baselineCommit = filepath.Join(tmp, "server-baseline"), dir, commit
	if err := goBuild(ctx, dir, bins.baseline, "./cmd/server"); err != nil {
		remove()
		return bins, func() {}, err
	}
	return bins, remove, nil
}

func git(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
