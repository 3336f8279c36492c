package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/bigseg/bigseg/segments"
)

// jsonString is encoding/json's encoding of s without HTML escaping: the reference.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "alice", `quote " and backslash \`, "ctl \x00\x01\x1f\x7f", "\n\r\t\b\f",
		"zoë 日本語 🎉", "bad \xff utf-8 \xc3", "\u2028\u2029", "<html>&amp;", "a/b+c%20",
	} {
		if got, want := string(appendString(nil, s)), jsonString(s); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"alice", "\x00\"\\\u2028", "\xff\xfe", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendString(nil, s)), jsonString(s); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestAppendResultIsValidJSON(t *testing.T) {
	m := segments.NewMembership([]string{"b\"x", "a\xff"}, []string{"c\n"})
	for _, r := range []segments.Answer{
		{ContextHash: segments.Hash("k"), Membership: m, Status: segments.Healthy},
		{ContextHash: segments.Hash("k"), Status: segments.Stale},
		{ContextHash: segments.Hash("k"), Status: segments.StoreError, Err: errors.New("x")},
	} {
		for _, key := range []string{"key \"with\" quotes", ""} { // "": by hash
			byHash := key == ""
			e := &encoder{}
			e.result(key, r)
			b := e.b
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if _, ok := v["contextKey"]; ok == byHash {
				t.Errorf("%s: contextKey present = %v for byHash %v", b, ok, byHash)
			}
			if _, ok := v["memberships"]; ok != (r.Err == nil) {
				t.Errorf("%s: memberships present = %v with error %v", b, ok, r.Err)
			}
		}
	}
}
