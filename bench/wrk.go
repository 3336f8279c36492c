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
	"time"
)

// wrkResult is one run of a load generator, as its script's done() reports it.
type wrkResult struct {
	Total      int64 `json:"total"`       // requests answered
	DurationUs int64 `json:"duration_us"` // wrk's own measurement window
	P50us      int64 `json:"p50_us"`
	P99us      int64 `json:"p99_us"`
	Non2xx     int64 `json:"non2xx"`
	Errors     int64 `json:"errors"` // connect, read, write and timeout errors
}

func (r wrkResult) duration() time.Duration { return time.Duration(r.DurationUs) * time.Microsecond }

func (r wrkResult) perSecond() float64 {
	if r.DurationUs <= 0 {
		return 0
	}
	return float64(r.Total) / r.duration().Seconds()
}

// The Lua scripts. setup numbers the threads; each builds its requests by hand around the
// placeholder @ of a request wrk.format made once (the Host header and all), which is much
// cheaper for wrk than formatting every request.
const (
	luaSetup = `
local thread_id = 0
setup = function(thread) thread_id = thread_id + 1; thread:set("id", thread_id) end
local head, tail
-- base is the path of the URL wrk was given, without its last "/": "" or /environments/NAME.
local base = (wrk.path:gsub("/$", ""))
local function template(path)
  head, tail = wrk.format("GET", base .. path):match("^(.-)@(.*)$")
end
`
	// args: seed, n. Context user-N, N uniform in [0, n).
	luaUniform = luaSetup + `
local n
init = function(args)
  math.randomseed(tonumber(args[1]) * 1000 + id)
  n = tonumber(args[2])
  template("/memberships/user-@")
end
request = function() return head .. math.random(0, n - 1) .. tail end
` + luaDone
	// args: keys file, start, threads. Walks the file's context indices from start, thread t
	// taking every threads-th one from start + t - 1, so that the threads together read a
	// contiguous stretch and the next run can continue where this one stopped.
	luaZipf = luaSetup + `
local keys, n, i, step = {}, 0, 0, 1
init = function(args)
  for line in io.lines(args[1]) do n = n + 1; keys[n] = tonumber(line) end
  step = tonumber(args[3])
  i = (tonumber(args[2]) + id - 1) % n
  template("/memberships/user-@")
end
request = function()
  local k = keys[i + 1]
  i = (i + step) % n
  return head .. k .. tail
end
` + luaDone
	// args: seed, n, size. POST of size uniformly random keys.
	luaBatch = luaSetup + `
local n, size
local headers = {["Content-Type"] = "application/json"}
init = function(args)
  math.randomseed(tonumber(args[1]) * 1000 + id)
  n, size = tonumber(args[2]), tonumber(args[3])
end
request = function()
  local keys = {}
  for j = 1, size do keys[j] = '"user-' .. math.random(0, n - 1) .. '"' end
  return wrk.format("POST", base .. "/memberships", headers, '{"contextKeys":[' .. table.concat(keys, ",") .. ']}')
end
` + luaDone
	luaDone = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('BENCHJSON {"total":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"non2xx":%d,"errors":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect + e.read + e.write + e.timeout))
end
`
)

// writeScripts writes the scripts into dir and returns their paths by name.
func writeScripts(dir string) (map[string]string, error) {
	paths := map[string]string{}
	for name, text := range map[string]string{"uniform": luaUniform, "zipf": luaZipf, "batch": luaBatch} {
		p := filepath.Join(dir, name+".lua")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			return nil, err
		}
		paths[name] = p
	}
	return paths, nil
}

// runWrk drives url with a script for d, from wrk pinned to cpus.
func runWrk(ctx context.Context, o options, url, script string, d time.Duration, args ...string) (wrkResult, error) {
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	cmdArgs := append([]string{"-c", o.clientCPUs, "wrk", "-t", strconv.Itoa(o.threads), "-c", strconv.Itoa(o.connections),
		"-d", strconv.Itoa(secs) + "s", "-s", script, url, "--"}, args...)
	return runSummarized(ctx, "wrk", exec.CommandContext(ctx, "taskset", cmdArgs...))
}

// runSummarized runs a load generator and parses the summary line it prints.
func runSummarized(ctx context.Context, name string, cmd *exec.Cmd) (wrkResult, error) {
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return wrkResult{}, ctx.Err()
	}
	if err != nil {
		return wrkResult{}, fmt.Errorf("%s: %v\n%s", name, err, out)
	}
	return parseSummary(out)
}

// parseSummary finds the BENCHJSON line the scripts print.
func parseSummary(out []byte) (wrkResult, error) {
	i := bytes.Index(out, []byte("BENCHJSON "))
	if i < 0 {
		return wrkResult{}, fmt.Errorf("no summary line in the output:\n%s", out)
	}
	line, _, _ := bytes.Cut(out[i+len("BENCHJSON "):], []byte("\n"))
	var r wrkResult
	if err := json.Unmarshal(line, &r); err != nil {
		return wrkResult{}, fmt.Errorf("summary %q: %w", line, err)
	}
	if r.Total <= 0 || r.DurationUs <= 0 {
		return r, fmt.Errorf("summary %q: no requests", line)
	}
	return r, nil
}
