package inventory

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/segments"
)

func reportEnvs(t *testing.T) []*segments.Environment {
	prod := &fakeStore{members: append(members(3, "beta.g1"), segments.NewMembership([]string{"vip.g2"}, []string{"beta.g1"})), cursor: "c1"}
	staging := &fakeStore{members: members(1, "beta.g1")}
	return []*segments.Environment{environment(t, "production", prod), environment(t, "staging", staging)}
}

func TestReportTable(t *testing.T) {
	var out bytes.Buffer
	if err := report(t.Context(), reportEnvs(t), Settings{}, &out, nil, false, newFakeClock().clock()); err != nil {
		t.Fatal(err)
	}
	want := `production: 4 contexts in 2 segments, scanned 2026-12-07T10:00:00Z to 2026-12-07T10:00:00Z, cursor "c1" to "c1"
SEGMENT  INCLUDED  EXCLUDED
beta.g1  3         1
vip.g2   1         0

staging: 1 contexts in 1 segments, scanned 2026-12-07T10:00:00Z to 2026-12-07T10:00:00Z, cursor "" to ""
SEGMENT  INCLUDED  EXCLUDED
beta.g1  1         0
`
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
}

func TestReportJSON(t *testing.T) {
	var out bytes.Buffer
	if err := report(t.Context(), reportEnvs(t), Settings{}, &out, nil, true, newFakeClock().clock()); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Environments []record `json:"environments"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	fc := newFakeClock()
	want := []record{
		{Environment: "production", State: "complete", Contexts: 4, StartedAt: fc.t, FinishedAt: fc.t, CursorStart: "c1", CursorFinish: "c1",
			Segments: []segmentRecord{{"beta.g1", 3, 1}, {"vip.g2", 1, 0}}},
		{Environment: "staging", State: "complete", Contexts: 1, StartedAt: fc.t, FinishedAt: fc.t, Segments: []segmentRecord{{"beta.g1", 1, 0}}},
	}
	if d := cmp.Diff(want, got.Environments); d != "" {
		t.Errorf("JSON (-want +got):\n%s", d)
	}
	if !strings.Contains(out.String(), `"segments": [`) {
		t.Errorf("not indented: %s", out.String())
	}
}

// TestReportProgress: 1,000 contexts at 100 a second take 10 s, during which the progress
// line is redrawn at most every 250 ms, then ended with the scan's figures.
func TestReportProgress(t *testing.T) {
	store := &fakeStore{members: members(1000, "a")}
	var out, progress bytes.Buffer
	err := report(t.Context(), []*segments.Environment{environment(t, "production", store)}, Settings{ReadsPerSecond: 100},
		&out, &progress, false, newFakeClock().clock())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(progress.String(), "\r")[1:]
	if len(lines) < 10 || len(lines) > 10000/250+2 {
		t.Errorf("%d redraws in 10 s, want at most one every 250 ms", len(lines))
	}
	if last := lines[len(lines)-1]; last != "production: 1000 contexts scanned in 10s, 100/s   \n" {
		t.Errorf("last line %q", last)
	}
	if !strings.HasPrefix(lines[1], "production: ") || !strings.HasSuffix(lines[1], "contexts scanned, 104/s   ") {
		t.Errorf("progress line %q", lines[1])
	}
}

func TestReportErrors(t *testing.T) {
	failing := &fakeStore{members: members(5, "a"), failAfter: 3}
	for name, env := range map[string]*segments.Environment{
		"environment x: its store cannot list its contexts": environment(t, "x", struct{ segments.Store }{failing}),
		"environment y: scan after 3 contexts: store down":  environment(t, "y", failing),
	} {
		var out bytes.Buffer
		err := report(t.Context(), []*segments.Environment{env}, Settings{}, &out, nil, false, newFakeClock().clock())
		if err == nil || err.Error() != name {
			t.Errorf("error %v, want %s", err, name)
		}
	}
	if terminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
}
