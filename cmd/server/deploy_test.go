package main

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/internal/redistest"
)

var (
	metricName = regexp.MustCompile(`\b(?:bigseg|go|process)_[a-z0-9_]+\b`)
	selector   = regexp.MustCompile(`\b((?:bigseg|go|process)_[a-z0-9_]+)\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// exported returns every metric name a real server exports, histogram series included, and
// the label names of each (le on the _bucket series; job and instance, which Prometheus adds
// to every target's series, on all): of a server on Redis, and of one on DynamoDB (moto).
func exported(t *testing.T) map[string]map[string]bool {
	t.Helper()
	names := map[string]map[string]bool{}
	add := func(srv *server) {
		srv.get(t, "/memberships/alice")
		for name, f := range srv.scrape(t) {
			labels := map[string]bool{"job": true, "instance": true}
			maps.Copy(labels, names[name])
			for _, m := range f.Metric {
				for _, l := range m.Label {
					labels[l.GetName()] = true
				}
			}
			names[name] = labels
			if f.GetType().String() == "HISTOGRAM" {
				names[name+"_sum"], names[name+"_count"] = labels, labels
				names[name+"_bucket"] = maps.Clone(labels)
				names[name+"_bucket"]["le"] = true
			}
		}
	}
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	seedRedis(t, c, prefix, map[string][2][]string{"alice": {{"seg.g1"}, nil}}, time.Now()) // a segment, for the inventory's series
	srv := start(t, map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": prefix, "BIGSEG_RESP_ADDR": "127.0.0.1:0",
		"BIGSEG_INVENTORY_INTERVAL": "1h", "BIGSEG_INVENTORY_READS_PER_SECOND": "1000000"}) // the walk is paced by every key of the shared Redis
	waitFor(t, "the first inventory scan", func() bool { return inventoryOf(t, srv).Scan.State == "complete" })
	add(srv)
	_, table := dynamoTable(t)
	dynamotest.Env(t, dynamotest.Shared(t).URL)
	add(start(t, map[string]string{"BIGSEG_DYNAMODB_TABLE": table}))
	return names
}

// unknownLabels returns the labels that expr selects or groups on but a metric it names does
// not have: a panel or rule that filters or groups on a label its metric lost shows nothing,
// or one line where there were many, without any error. A grouping applies to every metric
// of the expression (the dashboard and the rules group each expression's metrics alike).
func unknownLabels(expr string, names map[string]map[string]bool) []string {
	var bad []string
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			if labels, ok := names[m[1]]; ok && !labels[l[1]] {
				bad = append(bad, m[1]+" has no label "+l[1])
			}
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(g[1], ",") {
			l = strings.TrimSpace(l)
			for _, m := range metricName.FindAllString(expr, -1) {
				if labels, ok := names[m]; ok && l != "" && !labels[l] {
					bad = append(bad, m+" has no label "+l+" to group by")
				}
			}
		}
	}
	return bad
}

// TestDashboardAndAlertsUseExportedMetrics keeps deploy/ in step with the code: every metric a
// PromQL expression of the Grafana dashboard or the alert rules names must be exported, with
// every label the expression selects or groups on.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) { // not parallel: dynamotest.Env
	names := exported(t)

	raw, err := os.ReadFile("../../deploy/grafana/bigseg.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard does not parse: %v", err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		if p.Type == "row" { // a row groups panels: it has no query
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			used := metricName.FindAllString(tg.Expr, -1)
			if len(used) == 0 {
				t.Errorf("panel %q: %q names no bigseg metric", p.Title, tg.Expr)
			}
			for _, m := range used {
				if names[m] == nil {
					t.Errorf("panel %q uses %s, which bigseg does not export", p.Title, m)
				}
			}
			for _, b := range unknownLabels(tg.Expr, names) {
				t.Errorf("panel %q: %s", p.Title, b)
			}
		}
	}
	for _, want := range []string{"bigseg_store_available", "bigseg_store_last_synchronized_timestamp_seconds", "bigseg_membership_lookups_total",
		"bigseg_store_request_duration_seconds_bucket", "bigseg_http_request_duration_seconds_bucket",
		"bigseg_dynamodb_requests_total", "bigseg_dynamodb_consumed_read_capacity_units_total"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("dashboard does not show %s", want)
		}
	}

	rules, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metricName.FindAllString(string(rules), -1) {
		if names[m] == nil {
			t.Errorf("alerts.yml uses %s, which bigseg does not export", m)
		}
	}
	var file struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(rules, &file); err != nil {
		t.Fatalf("alerts.yml does not parse: %v", err)
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			for _, b := range unknownLabels(r.Expr, names) {
				t.Errorf("alert %s: %s", r.Alert, b)
			}
		}
	}
	t.Logf("%d dashboard expressions checked", exprs)
}
