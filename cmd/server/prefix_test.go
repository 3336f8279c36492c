package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/internal/redistest"
)

// A prefix under which nothing was ever synchronized (most often a wrong one) is said so in
// the status-change log line, which names the prefix.
func TestWrongPrefixIsLoggedAsNeverSynchronized(t *testing.T) {
	prefix := redistest.Prefix(t, redistest.Client(t)) // nothing written under it
	srv := start(t, map[string]string{"BIGSEG_REDIS_URL": redistest.URL(t), "BIGSEG_PREFIX": prefix})
	msg := fmt.Sprintf("big segment data is stale: no synchronization recorded under prefix %q: check that it is the prefix the synchronizer writes", prefix)
	if rec := srv.logs.wait(t, msg); rec["prefix"] != prefix {
		t.Errorf("the log line's prefix: %v, want %q", rec["prefix"], prefix)
	}
}

// A prefix with whitespace or a control character (a value pasted with its newline) is
// refused with a message that names it, for BIGSEG_PREFIX and an environment's prefix alike.
func TestConfigRefusesPrefixWithWhitespace(t *testing.T) {
	for _, env := range []map[string]string{
		{"BIGSEG_PREFIX": "relay\n"},
		{"BIGSEG_PREFIX": "re lay"},
		{"BIGSEG_PREFIX": "re\x00lay"},
		{"BIGSEG_ENVIRONMENTS": "production=re\tlay"},
		{"BIGSEG_ENVIRONMENTS": "production=re\x01lay"},
	} {
		env["BIGSEG_REDIS_URL"] = "redis://127.0.0.1:6379"
		_, err := configOf(env)
		if err == nil || !strings.Contains(err.Error(), "whitespace or control characters") {
			t.Errorf("%q: %v, want a refusal naming whitespace or control characters", env, err)
		}
	}
}

// BIGSEG_INVENTORY_INTERVAL is 0 (no scans) or at least a second; a smaller one (a unit
// forgotten: 500ms for 500s) is refused, with a message that says so.
func TestConfigInventoryInterval(t *testing.T) {
	for v, ok := range map[string]bool{"0": true, "1s": true, "1h": true, "999ms": false, "1ns": false, "-1s": false} {
		_, err := configOf(map[string]string{"BIGSEG_INVENTORY_INTERVAL": v})
		if ok != (err == nil) || !ok && !strings.Contains(err.Error(), "must be 0 or at least 1s") {
			t.Errorf("BIGSEG_INVENTORY_INTERVAL=%s: %v", v, err)
		}
	}
}
