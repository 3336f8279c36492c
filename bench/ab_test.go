package main

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestABPatchesApply keeps the A/B variants in bench/ab/ rerunnable, as BENCHMARKS.md says
// they are: each must still apply to the tree (and, when the tree is committed, to HEAD,
// which is what bench/paired and bench/run -baseline apply them to).
func TestABPatchesApply(t *testing.T) {
	patches, err := filepath.Glob("ab/*.patch")
	if err != nil {
		t.Fatal(err)
	}
	if len(patches) == 0 {
		t.Fatal("no patches in bench/ab")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, p := range patches {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "apply", "--check", abs)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s no longer applies: %v\n%s", p, err, out)
		}
	}
}
