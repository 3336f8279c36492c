package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/internal/redistest"
)

// load --replace --dry-run says on stderr that it compares, not loads, names no cursor it
// would make up (the real load makes up another), and ends by saying nothing was written.
func TestLoadDryRunSaysNothingWritten(t *testing.T) {
	prefix := redistest.Prefix(t, redistest.Client(t))
	file := filepath.Join(t.TempDir(), "f.json")
	writeContexts(t, file, 3, "", "seg.g1")
	stdout, stderr := loadWith(t, prefix, nil, "--replace", "--dry-run", file)
	if strings.Contains(stderr, "loading") || strings.Contains(stderr, " into ") {
		t.Errorf("a dry run's stderr says it loads:\n%s", stderr)
	}
	if !strings.HasSuffix(stderr, "dry run: nothing written\n") {
		t.Errorf("a dry run's stderr does not end saying nothing was written:\n%s", stderr)
	}
	if strings.Contains(stdout, "load-") || !strings.Contains(stdout, "a new cursor") {
		t.Errorf("a dry run's summary names a cursor it would make up, or none: %s", stdout)
	}
}
