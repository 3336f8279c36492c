package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/redis"
)

// fakeClock is a clock that moves by step at every reading, so that a phase that reports n
// times has lasted n steps: tests see progress lines without waiting for them.
type fakeClock struct {
	mu   sync.Mutex // the deleting phase reports from a goroutine per cluster master
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// writeContexts writes a fixture of n contexts, named user-0 to user-<n-1>, each in the refs
// given (the same for all).
func writeContexts(t *testing.T, path string, n int, cursor string, refs ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("{\n\"synchronizedOn\": 1764430000000,\n")
	if cursor != "" {
		fmt.Fprintf(&b, "\"cursor\": %q,\n", cursor)
	}
	b.WriteString("\"contexts\": {\n")
	quoted := `"` + strings.Join(refs, `", "`) + `"`
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `  "user-%06d@example.com": {"included": [%s]}`, i, quoted)
	}
	b.WriteString("\n}\n}\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// loadWith runs "server load" into Redis under prefix, with the fake clock if one is given.
// The configuration is the process's environment, set for the test.
func loadWith(t *testing.T, prefix string, clock *fakeClock, args ...string) (stdout, stderr string) {
	t.Helper()
	cfg, err := configOf(map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": prefix})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now
	if clock != nil {
		now = clock.now
	}
	var out, errOut bytes.Buffer
	if err := load(context.Background(), args, cfg, &out, &errOut, now); err != nil {
		t.Fatalf("load %v: %v\n%s%s", args, err, errOut.String(), out.String())
	}
	return out.String(), errOut.String()
}

// Every phase of a load prints its progress as it goes, then a last line: reading the file,
// parsing it, writing the contexts and, with --replace, deleting those it does not list.
func TestLoadPrintsProgressOfEveryPhase(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	store := redis.New(c, prefix)
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := range 1500 { // contexts the file does not list
		pipe.SAdd(ctx, store.IncludeKey(segments.Hash("gone-"+strconv.Itoa(i))), "old.g1")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "big.json")
	writeContexts(t, path, 8000, "", "beta-users.g3", "early-access.g2") // about 600 KB
	// A clock that moves a second at each reading makes every report due: each phase prints a
	// line for each of its reports (TestLoadMeterPacesLines checks the pacing).
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), step: time.Second}
	stdout, stderr := loadWith(t, prefix, clock, "--replace", "--batch", "500", path)

	phases := []struct {
		name        string
		progress    *regexp.Regexp // a line while the phase runs
		last        *regexp.Regexp // its last line
		minProgress int
	}{
		{"reading", regexp.MustCompile(`^read \d+\.\d MiB of 0\.6 MiB$`), regexp.MustCompile(`^read 0\.6 MiB from .*big\.json in (\d+m)?\d+s$`), 3},
		{"parsing", regexp.MustCompile(`^parsed \d+ contexts \(\d+\.\d MiB of 0\.6 MiB\)$`), regexp.MustCompile(`^parsed 8000 contexts in (\d+m)?\d+s$`), 3},
		{"announcing", nil, regexp.MustCompile(`^loading 8000 contexts from .* into standalone Redis`), 0},
		{"writing", regexp.MustCompile(`^loaded \d+/8000 contexts \(\d+ refs added, 0 removed\)$`), regexp.MustCompile(`^loaded 8000/8000 contexts \(16000 refs added, 0 removed\) in (\d+m)?\d+s$`), 15},
		{"deleting", regexp.MustCompile(`^deleting sets of unlisted contexts: \d+ keys scanned, \d+ deleted$`), regexp.MustCompile(`^deleted 1500 sets of unlisted contexts \(\d+ keys scanned\) in (\d+m)?\d+s$`), 2},
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	for _, ph := range phases {
		n := 0
		for len(lines) > 0 && ph.progress != nil && ph.progress.MatchString(lines[0]) {
			n, lines = n+1, lines[1:]
		}
		if n < ph.minProgress || len(lines) == 0 || !ph.last.MatchString(lines[0]) {
			t.Fatalf("%s: %d progress lines, want at least %d, then its last line; then:\n%s\nall of stderr:\n%s",
				ph.name, n, ph.minProgress, strings.Join(lines, "\n"), stderr)
		}
		lines = lines[1:]
	}
	if len(lines) != 0 {
		t.Errorf("stderr goes on after the last phase:\n%s", strings.Join(lines, "\n"))
	}
	if !strings.Contains(stdout, "loaded 8000 contexts: 16000 refs added, 0 refs removed, 1500 sets of unlisted contexts deleted;") ||
		!strings.Contains(stdout, "(new: the data changed)") {
		t.Errorf("summary: %s", stdout)
	}
}

// A load that changes nothing keeps the cursor (a new one would empty every running
// instance's cache) and still sets synchronized_on; a load that changes something, or that
// gives a cursor other than the stored one, sets it.
func TestLoadKeepsTheCursorWhenNothingChanged(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	ctx := context.Background()
	dir := t.TempDir()
	file := func(name string, n int, cursor string, refs ...string) string {
		path := filepath.Join(dir, name)
		writeContexts(t, path, n, cursor, refs...)
		return path
	}
	base := file("base.json", 50, "", "a.g1", "b.g1")
	fewer := file("fewer.json", 40, "", "a.g1", "b.g1")
	withCursor := file("cursor.json", 50, "v7", "a.g1", "b.g1")
	moreWithCursor := file("more-cursor.json", 60, "v7", "a.g1", "b.g1")
	steps := []struct {
		name    string
		args    []string
		changed bool   // whether the cursor must change
		summary string // in the summary line
		warning bool   // that the data changed under the same cursor
	}{
		{"first load", []string{base}, true, "(new: the data changed)", false},
		{"the same again", []string{base}, false, "unchanged (nothing changed)", false},
		{"the same with --replace", []string{"--replace", base}, false, "unchanged (nothing changed)", false},
		{"fewer contexts, without --replace", []string{fewer}, false, "unchanged (nothing changed)", false},
		{"fewer contexts, with --replace", []string{"--replace", fewer}, true, "10 sets of unlisted contexts deleted; synchronized_on 1764430000000, cursor load-", false},
		{"more again", []string{base}, true, "20 refs added", false},
		{"the file's cursor", []string{withCursor}, true, "cursor v7 (the file's, new)", false},
		{"the file's cursor again", []string{withCursor}, false, "cursor v7 unchanged (the file's, stored already)", false},
		{"the file's cursor again, with more contexts", []string{moreWithCursor}, false, "cursor v7 unchanged (the file's, stored already)", true},
	}
	for _, step := range steps {
		c.Set(ctx, synchronizedOnKey(prefix), "1", 0)
		before, _ := c.Get(ctx, cursorKey(prefix)).Result()
		stdout, stderr := loadWith(t, prefix, nil, step.args...)
		after, _ := c.Get(ctx, cursorKey(prefix)).Result()
		if (after != before) != step.changed || after == "" {
			t.Errorf("%s: cursor %q before, %q after; want changed: %v", step.name, before, after, step.changed)
		}
		if !strings.Contains(stdout, step.summary) || !strings.Contains(stdout, "cursor "+after) {
			t.Errorf("%s: summary %q, want it to say %q and cursor %s", step.name, stdout, step.summary, after)
		}
		if warned := strings.Contains(stderr, "warning: the data changed, but the file's cursor is the one stored already"); warned != step.warning {
			t.Errorf("%s: warned %v, want %v:\n%s", step.name, warned, step.warning, stderr)
		}
		if v, _ := c.Get(ctx, synchronizedOnKey(prefix)).Result(); v != "1764430000000" {
			t.Errorf("%s: synchronized_on = %q, want the file's", step.name, v)
		}
	}
}

// The load session docs/redis.md shows is what a load prints (stderr's progress, then the
// summary on stdout), but for the numbers that vary from run to run: times, the cursor and
// durations.
func TestLoadOutputAsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	const command = "$ BIGSEG_REDIS_URL=redis://127.0.0.1:6379 go run ./cmd/server load examples/memberships.json\n"
	_, rest, found := strings.Cut(string(doc), command)
	block, _, closed := strings.Cut(rest, "```")
	if !found || !closed {
		t.Fatalf("docs/redis.md has no console block of %q", command)
	}
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	stdout, stderr := loadWith(t, prefix, nil, "../../examples/memberships.json")
	got := strings.NewReplacer(`"`+prefix+`"`, `"launchdarkly"`, "../../examples/", "examples/").Replace(stderr + stdout)
	varying := []struct{ re, with string }{
		{`load-\d+-[0-9a-f]{8}`, "CURSOR"}, {`\b\d{13}\b`, "MS"}, {` in \d+(\.\d+)?(ns|µs|ms|s)\b`, " in D"},
		{`Redis \[[^]]*\]`, "Redis [ADDR]"},
	}
	normal := func(s string) string {
		for _, v := range varying {
			s = regexp.MustCompile(v.re).ReplaceAllString(s, v.with)
		}
		return strings.TrimSpace(s)
	}
	if diff := cmp.Diff(normal(block), normal(got)); diff != "" {
		t.Errorf("docs/redis.md's load session differs from what a load prints (-doc +printed):\n%s", diff)
	}
}
