package inventory

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/segments"
)

func reportEnvs(t *testing.T) []*segments.Environment {
	prod := &fakeStore{members: append(members(3, "beta.g1"), segments.NewMembership([]string{"vip.g2"}, []string{"beta.g1"})), cursor: "c1"}
	staging := &fakeStore{members: members(1, "beta.g1")}
	return []*segments.Environment{environment(t, "production", prod), environmentWithPrefix(t, "staging", "stg", staging)}
}

func TestReportTable(t *testing.T) {
	var out bytes.Buffer
	if err := report(t.Context(), reportEnvs(t), Settings{}, Output{Store: "redis"}, &out, io.Discard, nil, newFakeClock().clock()); err != nil {
		t.Fatal(err)
	}
	want := `production (store redis, prefix ""): 4 contexts in 2 segments, scanned 2026-12-07T10:00:00Z to 2026-12-07T10:00:00Z, cursor "c1" to "c1"
SEGMENT  INCLUDED  EXCLUDED
beta.g1  3         1
vip.g2   1         0

staging (store redis, prefix "stg"): 1 contexts in 1 segments, scanned 2026-12-07T10:00:00Z to 2026-12-07T10:00:00Z, cursor "" to ""
SEGMENT  INCLUDED  EXCLUDED
beta.g1  1         0
`
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
}

// TestReportJSON: --json prints what GET /segments answers (api/openapi.yaml's Inventory),
// an array of them for several environments, one object for one; the store and prefix go
// to stderr.
func TestReportJSON(t *testing.T) {
	var out, stderr bytes.Buffer
	if err := report(t.Context(), reportEnvs(t), Settings{}, Output{Store: "redis", JSON: handlers.WriteInventories}, &out, &stderr, nil, newFakeClock().clock()); err != nil {
		t.Fatal(err)
	}
	var got []json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 2 {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, o := range got {
		apitest.CheckSchema(t, "Inventory", o)
	}
	want := `{"environment":"production","contexts":4,"segments":[{"ref":"beta.g1","included":3,"excluded":1},` +
		`{"ref":"vip.g2","included":1,"excluded":0}],"scan":{"state":"complete","startedAt":"2026-12-07T10:00:00Z",` +
		`"finishedAt":"2026-12-07T10:00:00Z","cursorAtStart":"c1","cursorAtEnd":"c1"}}`
	var compact bytes.Buffer
	if err := json.Compact(&compact, got[0]); err != nil || compact.String() != want {
		t.Errorf("production (%v):\n%s\nwant\n%s", err, compact.String(), want)
	}
	if w := "production: store redis, prefix \"\"\nstaging: store redis, prefix \"stg\"\n"; stderr.String() != w {
		t.Errorf("stderr %q, want %q", stderr.String(), w)
	}
	out.Reset()
	if err := report(t.Context(), reportEnvs(t)[:1], Settings{}, Output{Store: "redis", JSON: handlers.WriteInventories}, &out, io.Discard, nil, newFakeClock().clock()); err != nil {
		t.Fatal(err)
	}
	apitest.CheckSchema(t, "Inventory", out.Bytes())
}

// TestReportProgress: 1,000 contexts at 100 a second take 10 s, during which the progress
// line is redrawn at most every 250 ms, then ended with the scan's figures.
func TestReportProgress(t *testing.T) {
	store := &fakeStore{members: members(1000, "a")}
	var out, progress bytes.Buffer
	err := report(t.Context(), []*segments.Environment{environment(t, "production", store)}, Settings{ReadsPerSecond: 100},
		Output{}, &out, io.Discard, &progress, newFakeClock().clock())
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
		err := report(t.Context(), []*segments.Environment{env}, Settings{}, Output{}, &out, io.Discard, nil, newFakeClock().clock())
		if err == nil || err.Error() != name {
			t.Errorf("error %v, want %s", err, name)
		}
	}
	if terminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
}

// TestReportPicks: --environment scans the one named, with the store's table named beside its
// prefix; an environment that does not exist is an error that lists the ones that do.
func TestReportPicks(t *testing.T) {
	var out bytes.Buffer
	o := Output{Environment: "staging", Store: "dynamodb", Table: "ld"}
	if err := report(t.Context(), reportEnvs(t), Settings{}, o, &out, io.Discard, nil, newFakeClock().clock()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), `staging (store dynamodb table ld, prefix "stg"): 1 contexts`) || strings.Contains(out.String(), "production") {
		t.Errorf("--environment staging printed:\n%s", out.String())
	}
	o.Environment = "nope"
	err := report(t.Context(), reportEnvs(t), Settings{}, o, &out, io.Discard, nil, newFakeClock().clock())
	if want := `inventory: no environment "nope": the environments are production, staging`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
