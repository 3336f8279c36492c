package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/apitest"
	"github.com/bigseg/bigseg/internal/redistest"
)

// segmentsBody is GET /segments.
type segmentsBody struct {
	Contexts int64 `json:"contexts"`
	Segments []struct {
		Ref                string
		Included, Excluded int64
	} `json:"segments"`
	Scan struct {
		State         string `json:"state"`
		FinishedAt    string `json:"finishedAt"`
		CursorAtStart string `json:"cursorAtStart"`
	} `json:"scan"`
}

// counts are an inventory's contexts and each segment's included and excluded counts.
type counts struct {
	contexts int64
	segments map[string][2]int64
}

func (b segmentsBody) counts() counts {
	c := counts{contexts: b.Contexts, segments: map[string][2]int64{}}
	for _, s := range b.Segments {
		c.segments[s.Ref] = [2]int64{s.Included, s.Excluded}
	}
	return c
}

func (c counts) equal(o counts) bool {
	return c.contexts == o.contexts && maps.Equal(c.segments, o.segments)
}

// inventoryOf is the server's GET /segments.
func inventoryOf(t *testing.T, srv *server) segmentsBody {
	t.Helper()
	resp, body := srv.get(t, "/segments")
	if resp.StatusCode != 200 {
		t.Fatalf("/segments: %d %s", resp.StatusCode, body)
	}
	return apitest.Decode[segmentsBody](t, body)
}

// contextsIn returns n contexts named name-i, each included in the refs of inc and excluded
// from those of exc.
func contextsIn(name string, n int, inc, exc []string) map[string][2][]string {
	m := map[string][2][]string{}
	for i := range n {
		m[name+"-"+strconv.Itoa(i)] = [2][]string{inc, exc}
	}
	return m
}

// fast is a scan rate that does not bind: the pace counts every key of the shared test Redis,
// other tests' too, and these tests are of the counts, not of the pace.
const fast = "1000000"

// A Redis-backed server scans its store every BIGSEG_INVENTORY_INTERVAL: /segments counts
// exactly the data written, a patch (new data, then a new cursor) shows in the next scan, and
// server inventory --json prints the same counts.
func TestInventoryCountsTheStore(t *testing.T) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	ctx := context.Background()
	data := contextsIn("a", 20, []string{"seg-a.g1"}, nil)
	maps.Copy(data, contextsIn("b", 10, []string{"seg-b.g1"}, []string{"seg-a.g1"}))
	maps.Copy(data, contextsIn("both", 3, []string{"seg-a.g1"}, []string{"seg-a.g1"})) // counts as included
	seedRedis(t, c, prefix, data, time.Now())
	c.Set(ctx, cursorKey(prefix), "c1", 0)
	env := map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": prefix, "BIGSEG_INVENTORY_INTERVAL": "1s",
		"BIGSEG_INVENTORY_READS_PER_SECOND": fast}
	srv := start(t, env)

	var got segmentsBody
	waitFor(t, "a complete scan at cursor c1", func() bool {
		got = inventoryOf(t, srv)
		return got.Scan.State == "complete" && got.Scan.CursorAtStart == "c1"
	})
	want := counts{contexts: 33, segments: map[string][2]int64{"seg-a.g1": {23, 10}, "seg-b.g1": {10, 0}}}
	if !got.counts().equal(want) {
		t.Errorf("/segments counts %+v, want %+v", got.counts(), want)
	}

	seedRedis(t, c, prefix, contextsIn("c", 7, []string{"seg-c.g1"}, nil), time.Now())
	c.Set(ctx, cursorKey(prefix), "c2", 0)
	waitFor(t, "a complete scan at cursor c2", func() bool {
		got = inventoryOf(t, srv)
		return got.Scan.State == "complete" && got.Scan.CursorAtStart == "c2"
	})
	want.contexts, want.segments["seg-c.g1"] = 40, [2]int64{7, 0}
	if !got.counts().equal(want) {
		t.Errorf("after the patch, /segments counts %+v, want %+v", got.counts(), want)
	}

	var out bytes.Buffer
	if err := runProgram(ctx, env, &out, io.Discard, "inventory", "--json"); err != nil {
		t.Fatalf("server inventory --json: %v", err)
	}
	apitest.CheckSchema(t, "Inventory", out.Bytes()) // what GET /segments answers
	var printed segmentsBody
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil {
		t.Fatalf("server inventory --json printed %q: %v", out.String(), err)
	}
	if p := printed.counts(); !p.equal(want) {
		t.Errorf("server inventory --json counts %+v, want %+v", p, want)
	}
	err := runProgram(ctx, env, io.Discard, io.Discard, "inventory", "--environment", "nope")
	if err == nil || !strings.Contains(err.Error(), "the environments are default") {
		t.Errorf("server inventory --environment nope: %v, want the valid names", err)
	}
	if err := runProgram(ctx, env, io.Discard, io.Discard, "inventory", "extra"); err == nil {
		t.Error("server inventory extra: no error")
	}
}

// Three replicas on one Redis prefix scan it about once an interval between them, not three
// times: the lease holder scans and stores its result, and every replica serves that, so all
// answer the same counts.
func TestInventoryFleetScansOnce(t *testing.T) {
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	seedRedis(t, c, prefix, contextsIn("a", 25, []string{"seg-a.g1"}, []string{"seg-b.g1"}), time.Now())
	env := map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": prefix, "BIGSEG_INVENTORY_INTERVAL": "1s",
		"BIGSEG_INVENTORY_READS_PER_SECOND": fast}
	fleet := []*server{start(t, env), start(t, env), start(t, env)}

	seen := map[string]bool{} // the scans the first replica served, by when they finished
	var bodies [3]segmentsBody
	waitFor(t, "five scans served, the same by every replica", func() bool {
		for i, srv := range fleet {
			bodies[i] = inventoryOf(t, srv)
		}
		if bodies[0].Scan.State == "complete" {
			seen[bodies[0].Scan.FinishedAt] = true
		}
		return len(seen) >= 5 && bodies[1].Scan.FinishedAt == bodies[0].Scan.FinishedAt && bodies[2].Scan.FinishedAt == bodies[0].Scan.FinishedAt
	})
	want := counts{contexts: 25, segments: map[string][2]int64{"seg-a.g1": {25, 0}, "seg-b.g1": {0, 25}}}
	for i, b := range bodies {
		if !b.counts().equal(want) {
			t.Errorf("replica %d counts %+v, want %+v", i, b.counts(), want)
		}
	}
	// Every scan is logged by the replica that ran it. Alone, each replica would have scanned
	// once a round, as many times as the most active one; with the lease, the others scan only
	// if the lease passes to them (its holder late by half an interval, on a loaded machine).
	scans, most := 0, 0
	var per []int
	for _, srv := range fleet {
		n := len(srv.logs.find("inventory scan complete"))
		scans, most, per = scans+n, max(most, n), append(per, n)
	}
	t.Logf("scans by replica: %v", per)
	if most < 5 || scans-most > 2 {
		t.Errorf("scans by replica %v: want one replica to scan (at least 5), the others at most 2 between them", per)
	}
}
