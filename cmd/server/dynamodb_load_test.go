package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
)

// dynamoLoad runs "server load" into the DynamoDB table of env (over dynamotest.Env), with the
// fake clock if one is given.
func dynamoLoad(t *testing.T, env map[string]string, clock *fakeClock, args ...string) (stdout, stderr string) {
	t.Helper()
	cfg, err := configOf(env)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now
	if clock != nil {
		now = clock.now
	}
	var out, errOut bytes.Buffer
	if err := load(context.Background(), args, cfg, &out, &errOut, now); err != nil {
		t.Fatalf("load %v: %v\n%s%s", args, err, errOut.String(), out.String())
	}
	return out.String(), errOut.String()
}

// dynamoMeta is the metadata item under prefix: synchronizedOn and lastVersion ("" for none).
func dynamoMeta(t *testing.T, c *awsdynamodb.Client, table, prefix string) (synced, version string) {
	t.Helper()
	item := dynamotest.Item(t, c, table, dynamotest.Key(dynamotest.MetadataKey(prefix), dynamotest.MetadataKey(prefix)))
	if v, ok := item["synchronizedOn"].(*types.AttributeValueMemberN); ok {
		synced = v.Value
	}
	if v, ok := item["lastVersion"].(*types.AttributeValueMemberS); ok {
		version = v.Value
	}
	return synced, version
}

// dynamoIncluded is the included set of key's item under prefix, sorted; nil without an item.
func dynamoIncluded(t *testing.T, c *awsdynamodb.Client, table, prefix, key string) []string {
	t.Helper()
	item := dynamotest.Item(t, c, table, dynamotest.Key(dynamotest.UserNamespace(prefix), segments.Hash(key)))
	if item == nil {
		return nil
	}
	ss, _ := item["included"].(*types.AttributeValueMemberSS)
	if ss == nil {
		return []string{}
	}
	out := slices.Clone(ss.Value)
	slices.Sort(out)
	return out
}

// TestDynamoDBLoad: server load writes a fixture into the table in LaunchDarkly's layout
// (no prefix by default), with progress lines for every phase; the same load again changes
// nothing and keeps lastVersion; --replace deletes the items of contexts the file does not
// list and sets a new lastVersion; a running instance answers the load at its next poll.
func TestDynamoDBLoad(t *testing.T) { // not parallel: dynamotest.Env
	c, table := dynamoTable(t)
	dynamotest.Env(t, dynamotest.Shared(t).URL)
	env := map[string]string{"BIGSEG_DYNAMODB_TABLE": table}
	dir := t.TempDir()
	all, fewer := filepath.Join(dir, "all.json"), filepath.Join(dir, "fewer.json")
	writeContexts(t, all, 120, "", "a.g1", "b.g1")
	writeContexts(t, fewer, 100, "", "c.g1")
	srv := start(t, map[string]string{"BIGSEG_DYNAMODB_TABLE": table, "BIGSEG_STATUS_POLL_INTERVAL": "100ms"})
	const first = "user-000000@example.com"

	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), step: time.Second}
	stdout, stderr := dynamoLoad(t, env, clock, "--batch", "25", all)
	for _, re := range []string{
		`(?m)^loading 120 contexts from .*all\.json into DynamoDB table ` + regexp.QuoteMeta(table) + ` \(region us-east-1\) under prefix ""$`,
		`(?m)^loaded \d+/120 contexts \(\d+ refs added, 0 removed\)$`,
		`(?m)^loaded 120/120 contexts \(240 refs added, 0 removed\) in \d+s$`,
	} {
		if !regexp.MustCompile(re).MatchString(stderr) {
			t.Errorf("stderr lacks %s:\n%s", re, stderr)
		}
	}
	if !strings.Contains(stdout, "loaded 120 contexts: 240 refs added, 0 refs removed, 0 items of unlisted contexts deleted (and 0 empty ones); synchronizedOn 1764430000000, cursor load-") ||
		!strings.Contains(stdout, "(new: the data changed)") {
		t.Errorf("summary: %s", stdout)
	}
	synced, v1 := dynamoMeta(t, c, table, "")
	if synced != "1764430000000" || !strings.HasPrefix(v1, "load-") {
		t.Errorf("metadata after the load: synchronizedOn %q, lastVersion %q", synced, v1)
	}
	if got := dynamoIncluded(t, c, table, "", first); !slices.Equal(got, []string{"a.g1", "b.g1"}) {
		t.Errorf("%s: included %v", first, got)
	}
	waitFor(t, "the load answered", func() bool { return srv.memberships(t, first)["a.g1"] })

	stdout, _ = dynamoLoad(t, env, nil, all)
	if _, v := dynamoMeta(t, c, table, ""); v != v1 || !strings.Contains(stdout, "cursor "+v1+" unchanged (nothing changed)") {
		t.Errorf("the same load again: lastVersion %q (was %q), summary %s", v, v1, stdout)
	}

	stdout, stderr = dynamoLoad(t, env, clock, "--replace", fewer)
	_, v2 := dynamoMeta(t, c, table, "")
	if v2 == v1 || !strings.Contains(stdout, "200 refs removed, 20 items of unlisted contexts deleted") {
		t.Errorf("--replace: lastVersion %q (was %q), summary %s", v2, v1, stdout)
	}
	if !regexp.MustCompile(`(?m)^deleted 20 items of unlisted contexts, 0 empty ones \(120 items queried\) in \d+s$`).MatchString(stderr) {
		t.Errorf("--replace: no last line of the deleting phase:\n%s", stderr)
	}
	if got := dynamoIncluded(t, c, table, "", first); !slices.Equal(got, []string{"c.g1"}) {
		t.Errorf("%s after --replace: included %v", first, got)
	}
	if got := dynamoIncluded(t, c, table, "", "user-000110@example.com"); got != nil {
		t.Errorf("an unlisted context after --replace: included %v, want no item", got)
	}
	waitFor(t, "the replacing load answered", func() bool { return srv.memberships(t, first)["c.g1"] })
}

// TestDynamoDBLoadAnEnvironment: with several environments, load writes the one named, under
// its prefix, and no other's data or lastVersion.
func TestDynamoDBLoadAnEnvironment(t *testing.T) { // not parallel: dynamotest.Env
	c, table := dynamoTable(t)
	relayWrite(t, c, table, "ld-prod", "", "prod-v1", dynamotest.Change{Hash: segments.Hash("alice"), AddIncluded: []string{"prod.g1"}})
	dynamotest.Env(t, dynamotest.Shared(t).URL)
	env := map[string]string{"BIGSEG_DYNAMODB_TABLE": table, "BIGSEG_ENVIRONMENTS": "production=ld-prod,staging=ld-staging"}
	dynamoLoad(t, env, nil, "--environment", "staging", "../../examples/memberships.json")
	if _, v := dynamoMeta(t, c, table, "ld-staging"); v == "" {
		t.Error("staging has no lastVersion after its load")
	}
	if _, v := dynamoMeta(t, c, table, "ld-prod"); v != "prod-v1" {
		t.Errorf("production's lastVersion after staging's load: %q", v)
	}
	if got := dynamoIncluded(t, c, table, "ld-staging", "alice"); len(got) != 2 {
		t.Errorf("staging's alice: %v", got)
	}
	if got := dynamoIncluded(t, c, table, "ld-prod", "alice"); !slices.Equal(got, []string{"prod.g1"}) {
		t.Errorf("production's alice after staging's load: %v", got)
	}
	if got := dynamoIncluded(t, c, table, "", "alice"); got != nil {
		t.Errorf("alice without a prefix: %v, want no item", got)
	}
}

// TestDynamoDBLoadIntoAMissingTable: a load into a table that does not exist fails naming it.
func TestDynamoDBLoadIntoAMissingTable(t *testing.T) { // not parallel: dynamotest.Env
	dynamotest.Env(t, dynamotest.Shared(t).URL)
	cfg, err := configOf(map[string]string{"BIGSEG_DYNAMODB_TABLE": "bigsegtest-no-such-table"})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err = load(context.Background(), []string{"../../examples/memberships.json"}, cfg, &out, &errOut, time.Now)
	if err == nil || !strings.Contains(err.Error(), "ResourceNotFoundException") || !strings.Contains(err.Error(), "table bigsegtest-no-such-table") {
		t.Errorf("load into a missing table: %v, want a ResourceNotFoundException that names the table", err)
	}
}
