package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
)

// memoryResult is the heap cost of a cached context, for one source tree.
type memoryResult struct {
	label string
	bytes float64
	err   error
}

var memRe = regexp.MustCompile(`([0-9.]+) heap-bytes/context`)

// measureMemory runs bigseg's cache memory benchmark (1,000,000 contexts cached) in each
// variant's source tree (once per tree).
func measureMemory(ctx context.Context, variants []variant) []memoryResult {
	var out []memoryResult
	seen := map[string]bool{}
	for _, v := range variants {
		if seen[v.src] {
			continue
		}
		seen[v.src] = true
		logf("memory: caching 1,000,000 contexts (%s)", v.label)
		bytes, err := cacheMemory(ctx, v.src)
		if err != nil {
			logf("memory of %s: %v", v.label, err)
		}
		out = append(out, memoryResult{label: v.label, bytes: bytes, err: err})
	}
	return out
}

func cacheMemory(ctx context.Context, dir string) (float64, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkCacheMemory$", "-benchtime", "1x", "./segments")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("memory benchmark: %v\n%s", err, out)
	}
	m := memRe.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("memory benchmark printed no figure:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}
