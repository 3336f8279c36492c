package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/internal/settings"
	"github.com/bigseg/bigseg/internal/telemetry"
)

// docFiles are the documents whose claims name tests: the README, every page of docs/, the
// benchmarks and their history, and the READMEs of the SDK adapters and the Helm chart.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	return append([]string{
		"../../README.md",
		"../../BENCHMARKS.md",
		"../../bench/HISTORY.md",
		"../../integrations/README.md",
		"../../deploy/helm/bigseg/README.md",
	}, pages...)
}

// Every test the docs name as evidence must exist: a renamed or removed test would leave a
// claim unbacked.
func TestDocsNameRealTests(t *testing.T) {
	t.Parallel()
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w+)\(`)
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
				defined[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z]\\w*)`")
	for _, doc := range docFiles(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel("../..", doc)
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			if !defined[m[1]] {
				t.Errorf("%s names %s, which no test file defines", rel, m[1])
			}
		}
	}
}

var update = flag.Bool("update", false, "rewrite docs/configuration.md's table from server -h")

// configMarker ends the hand-written part of docs/configuration.md; the table after it is
// what `server -h` prints.
const configMarker = "<!-- The table below is `server -h`, written by TestConfigurationDocListsEverySetting -update. -->"

// TestConfigurationDocListsEverySetting keeps the configuration reference equal to `server
// -h`: every setting, its type, default and description. With -update, it writes the table.
func TestConfigurationDocListsEverySetting(t *testing.T) {
	t.Parallel()
	var help bytes.Buffer
	if err := usage(&help); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, configMarker)
	if i < 0 {
		t.Fatalf("docs/configuration.md has no line %q", configMarker)
	}
	want := doc[:i] + configMarker + "\n\n" + helpTable(t, help.String())
	if *update {
		if err := os.WriteFile("../../docs/configuration.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Error("docs/configuration.md's table is not what server -h prints: run go test ./cmd/server -run TestConfigurationDocListsEverySetting -update")
	}
	if n := strings.Count(want[i:], "\n| `BIGSEG_"); n != len(settings.Names(varPrefix, &config{})) {
		t.Errorf("the table has %d settings, the server %d", n, len(settings.Names(varPrefix, &config{})))
	}
	if n := strings.Count(want, "\n| `OTEL_"); n != len(telemetry.Variables()) {
		t.Errorf("the table has %d OTEL_* variables, the server %d", n, len(telemetry.Variables()))
	}
}

// helpTable is the settings table of `server -h` as Markdown. The columns of the help are
// where its header's names begin.
func helpTable(t *testing.T, help string) string {
	t.Helper()
	var header string
	var cols []int
	var b strings.Builder
	b.WriteString("| variable | type | default | description |\n|---|---|---|---|\n")
	for line := range strings.Lines(help) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "KEY ") { // BIGSEG_*'s table, then OTEL_*'s
			header, cols = line, nil
			for _, name := range []string{"KEY", "TYPE", "DEFAULT", "DESCRIPTION"} {
				cols = append(cols, strings.Index(header, name))
			}
			continue
		}
		if header == "" || !strings.HasPrefix(line, "BIGSEG_") && !strings.HasPrefix(line, "OTEL_") {
			continue
		}
		var cells []string
		for j, c := range cols {
			end := len(line)
			if j+1 < len(cols) {
				end = min(cols[j+1], len(line))
			}
			cells = append(cells, strings.TrimSpace(line[min(c, len(line)):end]))
		}
		def := "unset"
		if cells[2] != "" {
			def = "`" + cells[2] + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", cells[0], cells[1], def, strings.ReplaceAll(cells[3], "|", "\\|"))
	}
	if header == "" {
		t.Fatal("server -h has no settings table")
	}
	return b.String()
}

// Every /status answer the docs show (and every status event of the stream) has the fields a
// real /status answers, of the same JSON types: a field added to the answer, or taken out,
// shows in the docs too.
func TestStatusExamplesAsDocumented(t *testing.T) {
	t.Parallel()
	srv := start(t, map[string]string{"BIGSEG_SEED_FILE": "../../examples/memberships.json"})
	resp, err := http.Get(srv.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var real map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&real); err != nil {
		t.Fatal(err)
	}
	shape := func(m map[string]any) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = fmt.Sprintf("%T", v)
		}
		return out
	}
	example := regexp.MustCompile(`(?m)^(?:data: )?(\{"available":.*\})$`)
	seen := 0
	for _, path := range docFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range example.FindAllStringSubmatch(string(b), -1) {
			seen++
			var doc map[string]any
			if err := json.Unmarshal([]byte(m[1]), &doc); err != nil {
				t.Errorf("%s: a /status example that is not JSON: %v\n%s", path, err, m[1])
				continue
			}
			if diff := cmp.Diff(shape(real), shape(doc)); diff != "" {
				t.Errorf("%s: a /status example differs from a real answer's fields (-real +doc):\n%s", path, diff)
			}
		}
	}
	if seen == 0 {
		t.Error("no /status example found in the docs: the test checks nothing")
	}
}

// Every relative link in the docs must lead somewhere: to a file that exists and, with a
// fragment, to a heading of that file (GitHub's anchors: lower case, punctuation dropped,
// spaces as hyphens).
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading := regexp.MustCompile(`(?m)^#+ (.+)$`)
	anchors := func(path string) map[string]bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		out := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(string(b), -1) {
			a := strings.Map(func(r rune) rune {
				switch {
				case r == ' ':
					return '-'
				case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
					return unicode.ToLower(r)
				}
				return -1
			}, strings.TrimSpace(m[1]))
			out[a] = true
		}
		return out
	}
	for _, doc := range docFiles(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s links to %s, which does not exist", doc, target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchors(path)[frag] {
				t.Errorf("%s links to %s, which has no such heading", doc, target)
			}
		}
	}
}

// The table docs/dynamodb.md tells users to create has the key schema and attribute types of
// the table the tests create on moto (and the store reads): its aws dynamodb create-table
// command, option by option, against DescribeTable of a test table.
func TestDynamoDBDocCreatesTheTestsTable(t *testing.T) {
	parallelOnMoto(t)
	b, err := os.ReadFile("../../docs/dynamodb.md")
	if err != nil {
		t.Fatal(err)
	}
	cmd := regexp.MustCompile(`aws dynamodb create-table(?:[^\n]*\\\n)*[^\n]*`).FindString(string(b))
	if cmd == "" {
		t.Fatal("docs/dynamodb.md has no aws dynamodb create-table command")
	}
	doc := map[string]bool{}
	for _, m := range regexp.MustCompile(`AttributeName=\w+,(?:AttributeType|KeyType)=\w+`).FindAllString(cmd, -1) {
		doc[m] = true
	}
	c, table := dynamoTable(t)
	out, err := c.DescribeTable(context.Background(), &awsdynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	for _, a := range out.Table.AttributeDefinitions {
		tests[fmt.Sprintf("AttributeName=%s,AttributeType=%s", *a.AttributeName, a.AttributeType)] = true
	}
	for _, k := range out.Table.KeySchema {
		tests[fmt.Sprintf("AttributeName=%s,KeyType=%s", *k.AttributeName, k.KeyType)] = true
	}
	if diff := cmp.Diff(tests, doc); diff != "" {
		t.Errorf("docs/dynamodb.md's create-table differs from the tests' table (-tests +doc):\n%s", diff)
	}
	if !strings.Contains(cmd, "--billing-mode PAY_PER_REQUEST") {
		t.Errorf("the command is not on-demand: %s", cmd)
	}
}
