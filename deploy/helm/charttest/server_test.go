package charttest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// serverVar is one setting as `server -h` lists it.
type serverVar struct {
	typ, def, desc string
}

// facts are what the checks compare the chart with, taken from bigseg itself.
type facts struct {
	repoRoot  string
	server    string               // the real server binary, built from the repository
	vars      map[string]serverVar // every setting `server -h` lists
	alerts    []byte               // deploy/prometheus/alerts.yml
	dashboard []byte               // deploy/grafana/bigseg.json
	values    []byte               // the chart's values.yaml
}

// known reports whether the server reads name.
func (f *facts) known(name string) bool {
	_, ok := f.vars[name]
	return ok
}

var (
	factsOnce sync.Once
	theFacts  *facts
	factsErr  error
	buildDir  string // holds the server binary; TestMain removes it
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// getFacts builds the server once per test binary (go build ./cmd/server in the repository
// root, three directories up) and reads its settings from `server -h`.
func getFacts(t *testing.T) *facts {
	t.Helper()
	factsOnce.Do(func() { theFacts, factsErr = loadFacts() })
	if factsErr != nil {
		t.Fatal(factsErr)
	}
	return theFacts
}

func loadFacts() (*facts, error) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		return nil, err
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/bigseg/bigseg\n")) {
		return nil, fmt.Errorf("%s is not bigseg's repository root (%v)", root, err)
	}
	f := &facts{repoRoot: root}
	if buildDir, err = os.MkdirTemp("", "bigseg-charttest-"); err != nil {
		return nil, err
	}
	f.server = filepath.Join(buildDir, "server")
	build := exec.Command("go", "build", "-o", f.server, "./cmd/server")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/server: %v\n%s", err, out)
	}
	help := exec.Command(f.server, "-h")
	help.Env = []string{} // the server's defaults, not this environment's
	out, err := help.Output()
	if err != nil {
		return nil, fmt.Errorf("server -h: %v", err)
	}
	if f.vars, err = parseUsage(string(out)); err != nil {
		return nil, err
	}
	for p, dst := range map[string]*[]byte{
		"deploy/prometheus/alerts.yml":   &f.alerts,
		"deploy/grafana/bigseg.json":     &f.dashboard,
		"deploy/helm/bigseg/values.yaml": &f.values,
	} {
		if *dst, err = os.ReadFile(filepath.Join(root, p)); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// parseUsage reads the table `server -h` prints (envconfig's: KEY, TYPE, DEFAULT, maybe
// REQUIRED, DESCRIPTION, aligned in columns) by the header's column positions.
func parseUsage(out string) (map[string]serverVar, error) {
	lines := strings.Split(out, "\n")
	var header string
	i := 0
	for ; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "KEY ") {
			header = lines[i]
			break
		}
	}
	cols := map[string]int{}
	for _, c := range []string{"TYPE", "DEFAULT", "DESCRIPTION"} {
		cols[c] = strings.Index(header, c)
		if cols[c] < 0 {
			return nil, fmt.Errorf("server -h: no %s column in %q", c, header)
		}
	}
	// The default ends where the next column begins: REQUIRED, if the table has it.
	if cols["REQUIRED"] = strings.Index(header, "REQUIRED"); cols["REQUIRED"] < 0 {
		cols["REQUIRED"] = cols["DESCRIPTION"]
	}
	field := func(line string, from, to int) string {
		if from >= len(line) {
			return ""
		}
		return strings.TrimSpace(line[from:min(to, len(line))])
	}
	vars := map[string]serverVar{}
	for _, line := range lines[i+1:] {
		if !strings.HasPrefix(line, "BIGSEG_") {
			continue
		}
		name := strings.Fields(line)[0]
		vars[name] = serverVar{
			typ:  field(line, cols["TYPE"], cols["DEFAULT"]),
			def:  field(line, cols["DEFAULT"], cols["REQUIRED"]),
			desc: field(line, cols["DESCRIPTION"], len(line)),
		}
	}
	if len(vars) < 10 {
		return nil, fmt.Errorf("server -h lists only %d BIGSEG_ settings:\n%s", len(vars), out)
	}
	return vars, nil
}

func TestServerUsageParses(t *testing.T) {
	f := getFacts(t)
	for name, want := range map[string]serverVar{
		"BIGSEG_ADDR":              {typ: "String", def: ":8080"},
		"BIGSEG_SHUTDOWN_DELAY":    {typ: "Duration", def: "5s"},
		"BIGSEG_REDIS_URL":         {typ: "String", def: ""},
		"BIGSEG_API_TOKENS":        {typ: "Comma-separated list of String", def: ""},
		"BIGSEG_METRICS_TLS":       {typ: "True or False", def: "false"},
		"BIGSEG_WRITE_TIMEOUT":     {typ: "Duration", def: "15s"},
		"BIGSEG_ENVIRONMENTS":      {typ: "Comma-separated list of String", def: ""},
		"BIGSEG_PREFIX":            {typ: "String", def: "launchdarkly"},
		"BIGSEG_BODY_READ_TIMEOUT": {typ: "Duration", def: "2s"},
	} {
		got, ok := f.vars[name]
		if !ok {
			t.Errorf("server -h does not list %s", name)
			continue
		}
		if got.typ != want.typ || got.def != want.def || got.desc == "" {
			t.Errorf("%s: parsed type %q default %q description %q; want %q, %q and a description", name, got.typ, got.def, got.desc, want.typ, want.def)
		}
	}
}
