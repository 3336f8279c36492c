package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Scenarios measured in rounds, in the order a round measures them; storm and memory are
// measured once, after the rounds.
var (
	roundScenarios = []string{"hot", "cold", "zipf", "batch", "redis"}
	allScenarios   = append(slices.Clone(roundScenarios), "storm", "memory")
)

// kind is what a system is, which says how to read its counters.
type kind int

const (
	kindChi kind = iota
	kindBigseg
	kindWrapper
	kindRedis
)

// Labels of the systems that are not bigseg.
const (
	labelChi     = "bare chi"
	labelWrapper = "LaunchDarkly wrapper"
	labelRedis   = "go-redis"
	labelRESP    = "bigseg over RESP"
)

// variant is one build and configuration of bigseg: the current tree's, or the baseline's.
type variant struct {
	label string   // "bigseg", or "bigseg@REV" for the baseline
	bin   string   // the server binary
	src   string   // its source tree, for the memory benchmark
	env   []string // -env, and for the baseline -baseline-env after it

	environments int // if more than 1, served from BIGSEG_ENVIRONMENTS, looked up in the first
}

// system is one thing measured in every round: a server in one scenario.
type system struct {
	name       string // as the report shows it
	label      string // bigseg, bigseg@REV, LaunchDarkly wrapper, bare chi, go-redis
	scenario   string
	kind       kind
	proc       *proc // nil for the Redis ceiling, whose load generator is the measured client
	perRequest int   // lookups per request
	resp       bool  // driven over the server's Redis-protocol listener (bench/respload), not HTTP
}

// Cache settings of the servers, by configuration. bigseg's hot server keeps its 1,000 keys
// for the whole run; the wrapper's default 1,000 entries hold them too, given the same TTL.
// The SDK cannot turn its cache off: a TTL of 0 makes every entry expire as it is stored.
var (
	bigsegCache = map[string][]string{
		"hot":      {"BIGSEG_CACHE_SIZE=100000", "BIGSEG_CACHE_TTL=1h"},
		"off":      {"BIGSEG_CACHE_SIZE=0"},
		"defaults": nil,
	}
	wrapperCache = map[string][]string{
		"hot":      {"-cache-ttl", "1h"},
		"off":      {"-cache-ttl", "0"},
		"defaults": nil,
	}
)

// configFor is the server configuration a scenario runs on.
func configFor(scenario string) string {
	switch scenario {
	case "hot":
		return "hot"
	case "cold", "batch":
		return "off"
	}
	return "defaults" // zipf, storm
}

// servers are the server processes of a run, by label and configuration.
type servers struct {
	procs  []*proc
	byName map[string]*proc
}

func (s *servers) add(label, config string, p *proc) {
	s.procs = append(s.procs, p)
	s.byName[label+"/"+config] = p
}

func (s *servers) get(label, config string) *proc { return s.byName[label+"/"+config] }

func (s *servers) stop() {
	for _, p := range s.procs {
		p.stop()
	}
}

// startServers starts every server the chosen scenarios need, pinned to the server CPUs, and
// fills the caches of the hot ones.
func (b *bench) startServers(ctx context.Context, variants []variant) (*servers, error) {
	s := &servers{byName: map[string]*proc{}}
	for _, config := range b.configs() {
		for _, v := range variants {
			p, err := b.startBigseg(ctx, v, config)
			if err != nil {
				s.stop()
				return nil, err
			}
			s.add(v.label, config, p)
		}
		if b.wrapperRuns(config) {
			p, err := b.startWrapper(ctx, config)
			if err != nil {
				s.stop()
				return nil, err
			}
			s.add(labelWrapper, config, p)
		}
		if b.respRuns(config) {
			p, err := b.startBigsegRESP(ctx, config)
			if err != nil {
				s.stop()
				return nil, err
			}
			s.add(labelRESP, config, p)
		}
	}
	if err := sameAnswers(ctx, s.procs); err != nil {
		s.stop()
		return nil, err
	}
	if !b.o.scenarios["hot"] {
		return s, nil
	}
	for name, p := range s.byName {
		if strings.HasSuffix(name, "/hot") {
			warm(ctx, p)
		}
	}
	chi, err := b.startChi(ctx, s.get(variants[0].label, "hot"))
	if err != nil {
		s.stop()
		return nil, err
	}
	s.add(labelChi, "hot", chi)
	return s, nil
}

// wrapperRuns says whether the wrapper serves in a configuration: in hot, cold and zipf only.
func (b *bench) wrapperRuns(config string) bool {
	for _, sc := range []string{"hot", "cold", "zipf"} {
		if b.o.wrapper && b.o.scenarios[sc] && configFor(sc) == config {
			return true
		}
	}
	return false
}

// respRuns says whether bigseg over RESP serves in a configuration: with -resp, in hot and
// zipf only.
func (b *bench) respRuns(config string) bool {
	for _, sc := range []string{"hot", "zipf"} {
		if b.o.resp && b.o.scenarios[sc] && configFor(sc) == config {
			return true
		}
	}
	return false
}

// startBigsegRESP starts a bigseg server of its own (its own cache) with the Redis-protocol
// listener on, otherwise as the current tree's bigseg in that configuration.
func (b *bench) startBigsegRESP(ctx context.Context, config string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	v := variant{label: labelRESP, bin: b.bins.server, src: ".", env: append(slices.Clone(b.o.env), "BIGSEG_RESP_ADDR="+addr)}
	p, err := b.startBigseg(ctx, v, config)
	if err != nil {
		return nil, err
	}
	p.resp = addr
	return p, nil
}

// configs are the server configurations the chosen scenarios need.
func (b *bench) configs() []string {
	var out []string
	for _, sc := range allScenarios {
		if c := configFor(sc); b.o.scenarios[sc] && sc != "memory" && sc != "redis" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func (b *bench) startBigseg(ctx context.Context, v variant, config string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := []string{"BIGSEG_REDIS_URL=" + b.redis.url, "BIGSEG_LOG_LEVEL=warn",
		"BIGSEG_SHUTDOWN_DELAY=0s", "BIGSEG_ADDR=" + addr, "BIGSEG_METRICS_ADDR=" + pprofAddr}
	if v.environments <= 1 {
		env = append(env, "BIGSEG_PREFIX="+prefix)
	}
	env = append(append(env, bigsegCache[config]...), v.env...)
	if v.environments > 1 {
		env = append(env, environmentsEnv(v.environments, config)...)
	}
	name := strings.ReplaceAll(v.label, "/", "_") + "-" + config
	p, err := startProc(ctx, procSpec{name: name, cpus: b.o.serverCPUs, bin: v.bin, env: env, dir: b.tmp,
		ready: httpReady("http://" + addr + "/readyz")})
	if err != nil {
		return nil, err
	}
	p.url, p.pprof, p.metrics = "http://"+addr, "http://"+pprofAddr, "http://"+pprofAddr
	p.lookups = p.url
	if v.environments > 1 {
		p.lookups += "/environments/env0"
	}
	return p, nil
}

func (b *bench) startWrapper(ctx context.Context, config string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"-addr", addr, "-redis", b.redis.url, "-prefix", prefix, "-pprof-addr", pprofAddr},
		wrapperCache[config]...)
	p, err := startProc(ctx, procSpec{name: "ldwrapper-" + config, cpus: b.o.serverCPUs, bin: b.bins.wrapper,
		args: args, dir: b.tmp, ready: httpReady("http://" + addr + "/readyz")})
	if err != nil {
		return nil, err
	}
	p.url, p.pprof = "http://"+addr, "http://"+pprofAddr
	p.metrics, p.lookups = p.url, p.url
	return p, nil
}

// startChi starts the bare chi ceiling with the body and headers of a real bigseg answer
// (Date aside, and Content-Length, which it sets from the body).
func (b *bench) startChi(ctx context.Context, bigseg *proc) (*proc, error) {
	body, header, err := get(ctx, bigseg.lookups+"/memberships/"+contextKey(1))
	if err != nil {
		return nil, err
	}
	bodyFile := filepath.Join(b.tmp, "chi-body.json")
	if err := os.WriteFile(bodyFile, body, 0o600); err != nil {
		return nil, err
	}
	b.report.body, b.report.headers = len(body), mirroredHeaders(header)
	args := []string{"http", "-body-file", bodyFile}
	for _, h := range b.report.headers {
		args = append(args, "-header", h)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := startProc(ctx, procSpec{name: "chi", cpus: b.o.serverCPUs, bin: b.bins.ceiling,
		args: append(args, "-addr", addr), dir: b.tmp, ready: httpReady("http://" + addr + "/memberships/x")})
	if err != nil {
		return nil, err
	}
	p.url = "http://" + addr
	p.lookups = p.url
	return p, nil
}

// lookupAnswer is what every server must answer alike: bigseg's fields for a lookup by key.
// Fields a server adds are not compared, so that a baseline may differ in those.
type lookupAnswer struct {
	ContextKey  string          `json:"contextKey"`
	ContextHash string          `json:"contextHash"`
	Memberships map[string]bool `json:"memberships"`
	Status      string          `json:"status"`
}

// sameAnswers checks that every server answers the first contexts alike, so that all of them
// do the same work.
func sameAnswers(ctx context.Context, procs []*proc) error {
	for i := range 10 {
		var want lookupAnswer
		for j, p := range procs {
			body, _, err := get(ctx, p.lookups+"/memberships/"+contextKey(i))
			if err != nil {
				return err
			}
			var got lookupAnswer
			if err := json.Unmarshal(body, &got); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			if j == 0 {
				want = got
			} else if !reflect.DeepEqual(got, want) {
				return fmt.Errorf("%s answers %s for %s, unlike %s (%+v)", p.name, body, contextKey(i), procs[0].name, want)
			}
		}
	}
	return nil
}

// mirroredHeaders are the headers of an answer that the ceiling copies, as sorted
// "Name: value" lines: all but Date, which net/http writes itself, and Content-Length, which
// the ceiling sets from the body.
func mirroredHeaders(h http.Header) []string {
	var out []string
	for name, values := range h {
		if name == "Date" || name == "Content-Length" {
			continue
		}
		for _, v := range values {
			out = append(out, name+": "+v)
		}
	}
	slices.Sort(out)
	return out
}

// warm asks a hot server for each hot key once, so that all of them are cached.
func warm(ctx context.Context, p *proc) {
	for i := range hotKeys {
		if _, _, err := get(ctx, p.lookups+"/memberships/"+contextKey(i)); err != nil {
			logf("warming %s: %v", p.name, err)
			return
		}
	}
}

// get returns the body and headers of a 200 answer.
func get(ctx context.Context, url string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, resp.Header, err
}

// systems lists what each round measures, scenario by scenario: the ceiling first, then
// bigseg and its baseline, then the wrapper.
func (b *bench) systems(s *servers, variants []variant) []*system {
	var out []*system
	for _, sc := range roundScenarios {
		if !b.o.scenarios[sc] {
			continue
		}
		switch sc {
		case "hot":
			out = append(out, &system{name: labelChi + " (same body and headers)", label: labelChi, scenario: sc, kind: kindChi, proc: s.get(labelChi, "hot"), perRequest: 1})
		case "redis":
			out = append(out, &system{name: labelRedis + ", 2 SMEMBERS pipelined (Redis ceiling)", label: labelRedis, scenario: sc, kind: kindRedis, perRequest: 1})
			continue
		}
		for _, v := range variants {
			out = append(out, &system{name: v.label + " " + scenarioTitle(sc), label: v.label, scenario: sc, kind: kindBigseg,
				proc: s.get(v.label, configFor(sc)), perRequest: lookupsPerRequest(sc)})
		}
		if p := s.get(labelRESP, configFor(sc)); p != nil && (sc == "hot" || sc == "zipf") {
			out = append(out, &system{name: labelRESP + " " + scenarioTitle(sc) + " (2 SMEMBERS per lookup)", label: labelRESP, scenario: sc,
				kind: kindBigseg, proc: p, perRequest: 1, resp: true})
		}
		if p := s.get(labelWrapper, configFor(sc)); p != nil && sc != "batch" {
			out = append(out, &system{name: labelWrapper + " " + scenarioTitle(sc), label: labelWrapper, scenario: sc, kind: kindWrapper, proc: p, perRequest: 1})
		}
	}
	return out
}

func scenarioTitle(sc string) string {
	if sc == "batch" {
		return "batch of " + strconv.Itoa(batchSize)
	}
	return sc
}

func lookupsPerRequest(sc string) int {
	if sc == "batch" {
		return batchSize
	}
	return 1
}
