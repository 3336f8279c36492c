package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// result is one measurement.
type result struct {
	Requests   float64 // per second
	Lookups    float64 // per second (Requests x lookups per request)
	P50, P99   time.Duration
	Non2xx     int64
	Errors     int64
	Total      int64
	DurationUs int64
}

// wrkDone makes wrk print its summary as one JSON line.
const wrkDone = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('BENCHJSON {"total":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"non2xx":%d,"errors":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect + e.read + e.write + e.timeout))
end
`

// wrkGetRandom requests /memberships/user-N for N uniform in [0, n).
func wrkGetRandom(n int) string {
	return fmt.Sprintf(`
local counter = 0
setup = function(thread) counter = counter + 1; thread:set("id", counter) end
init = function(args) math.randomseed(os.time() * 1000 + id) end
request = function()
  return wrk.format("GET", "/memberships/user-" .. math.random(0, %d))
end
`, n-1) + wrkDone
}

// wrkPostBatch posts batches of size random keys in [0, n).
func wrkPostBatch(n, size int) string {
	return fmt.Sprintf(`
local counter = 0
setup = function(thread) counter = counter + 1; thread:set("id", counter) end
init = function(args) math.randomseed(os.time() * 1000 + id) end
request = function()
  local keys = {}
  for i = 1, %d do keys[i] = '"user-' .. math.random(0, %d) .. '"' end
  local body = '{"contextKeys":[' .. table.concat(keys, ",") .. ']}'
  return wrk.format("POST", "/memberships", {["Content-Type"] = "application/json"}, body)
end
`, size, n-1) + wrkDone
}

// runWrk drives url with script for d, and returns the measurement.
func runWrk(ctx context.Context, o options, dir, url, script string, perRequest int) (result, error) {
	path := filepath.Join(dir, fmt.Sprintf("script-%d.lua", time.Now().UnixNano()))
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		return result{}, err
	}
	out, err := exec.CommandContext(ctx, "wrk", "-t", strconv.Itoa(o.threads), "-c", strconv.Itoa(o.connections),
		"-d", strconv.Itoa(int(o.duration.Seconds()))+"s", "--latency", "-s", path, url).CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	i := bytes.Index(out, []byte("BENCHJSON "))
	if i < 0 {
		return result{}, fmt.Errorf("wrk printed no summary:\n%s", out)
	}
	line := strings.SplitN(string(out[i+len("BENCHJSON "):]), "\n", 2)[0]
	var s struct {
		Total, DurationUs, P50us, P99us, Non2xx, Errors int64
	}
	var raw map[string]int64
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		return result{}, fmt.Errorf("wrk summary %q: %v", line, err)
	}
	s.Total, s.DurationUs, s.P50us, s.P99us, s.Non2xx, s.Errors = raw["total"], raw["duration_us"], raw["p50_us"], raw["p99_us"], raw["non2xx"], raw["errors"]
	secs := float64(s.DurationUs) / 1e6
	r := result{
		Requests: float64(s.Total) / secs, P50: time.Duration(s.P50us) * time.Microsecond, P99: time.Duration(s.P99us) * time.Microsecond,
		Non2xx: s.Non2xx, Errors: s.Errors, Total: s.Total, DurationUs: s.DurationUs,
	}
	r.Lookups = r.Requests * float64(perRequest)
	return r, nil
}
