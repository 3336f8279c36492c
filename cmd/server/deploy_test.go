package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/internal/redistest"
)

var metricName = regexp.MustCompile(`\b(?:bigseg|go|process)_[a-z0-9_]+\b`)

// exported returns every metric name a real server exports, histogram series included.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	srv := start(t, map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": "bigsegtest:deploy:nothing",
		"BIGSEG_RESP_ADDR": "127.0.0.1:0"})
	srv.get(t, "/memberships/alice")
	names := map[string]bool{}
	for name, f := range srv.scrape(t) {
		names[name] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[name+s] = true
			}
		}
	}
	return names
}

// TestDashboardAndAlertsUseExportedMetrics keeps deploy/ in step with the code: every metric a
// PromQL expression of the Grafana dashboard or the alert rules names must be exported.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
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
				if !names[m] {
					t.Errorf("panel %q uses %s, which bigseg does not export", p.Title, m)
				}
			}
		}
	}
	for _, want := range []string{"bigseg_store_available", "bigseg_store_last_synchronized_timestamp_seconds", "bigseg_membership_lookups_total",
		"bigseg_store_request_duration_seconds_bucket", "bigseg_http_request_duration_seconds_bucket"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("dashboard does not show %s", want)
		}
	}

	rules, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metricName.FindAllString(string(rules), -1) {
		if !names[m] {
			t.Errorf("alerts.yml uses %s, which bigseg does not export", m)
		}
	}
	t.Logf("%d dashboard expressions checked", exprs)
}
