package memory_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/memory"
)

func TestParseFixture(t *testing.T) {
	data := `{
  "synchronizedOn": 1764430000000,
  "contexts": {
    "alice": {"included": ["beta.g3"], "excluded": ["blocked.g1"]},
    "a/b %+ ü": {"excluded": ["beta.g3"]}
  },
  "hashedContexts": {
    "` + segments.Hash("carol") + `": {"included": ["vip.g1"]}
  }
}`
	f, err := memory.ParseFixture([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if f.SynchronizedOn == nil || !f.SynchronizedOn.Equal(time.UnixMilli(1764430000000)) {
		t.Errorf("SynchronizedOn = %v", f.SynchronizedOn)
	}
	want := []memory.Context{
		{Key: "alice", Hash: segments.Hash("alice"), Included: []string{"beta.g3"}, Excluded: []string{"blocked.g1"}, Line: 4},
		{Key: "a/b %+ ü", Hash: segments.Hash("a/b %+ ü"), Excluded: []string{"beta.g3"}, Line: 5},
		{Hash: segments.Hash("carol"), Included: []string{"vip.g1"}, Line: 8},
	}
	if diff := cmp.Diff(want, f.Contexts); diff != "" {
		t.Errorf("contexts (-want +got):\n%s", diff)
	}
}

func TestParseFixtureOptionalFields(t *testing.T) {
	for _, data := range []string{`{}`, `{"contexts":{}}`, " {\"synchronizedOn\":0}\n"} {
		f, err := memory.ParseFixture([]byte(data))
		if err != nil {
			t.Errorf("%s: %v", data, err)
			continue
		}
		if len(f.Contexts) != 0 {
			t.Errorf("%s: %d contexts", data, len(f.Contexts))
		}
	}
}

func TestParseFixtureErrors(t *testing.T) {
	tests := []struct {
		name, data string
		want       string // prefix: line and field at fault
	}{
		{"empty file", ``, "1: fixture: unexpected end of file"},
		{"not an object", `[]`, `1: fixture: expected "{"`},
		{"syntax error", "{\n\"contexts\": {\n\"alice\": {\"included\": [\"a\",]}\n}}", `3: contexts["alice"]: invalid JSON`},
		{"unknown top-level field", "{\n  \"context\": {}\n}", `2: unknown field "context"`},
		{"unknown entry field", "{\"contexts\": {\n\"alice\": {\"include\": [\"a\"]}}}", `2: contexts["alice"]: json: unknown field "include"`},
		{"ref not a string", "{\"contexts\": {\n\n\"alice\": {\"included\": [1]}}}", `3: contexts["alice"].included: want a string, found number`},
		{"empty ref", "{\"contexts\": {\"bob\": {\"excluded\": [\"x\", \"\"]}}}", `1: contexts["bob"].excluded[1]: empty segment ref`},
		{"empty key", "{\"contexts\": {\"\": {}}}", `1: contexts[""]: context key is empty`},
		{"bad hash", "{\"hashedContexts\": {\n\"not base64!\": {}}}", `2: hashedContexts["not base64!"]: context hash has a character outside`},
		{"same context twice", "{\"contexts\": {\"alice\": {}},\n\"hashedContexts\": {\"" + segments.Hash("alice") + "\": {}}}", `2: hashedContexts[` + "\"" + segments.Hash("alice") + `"]: the same context is already listed on line 1`},
		{"duplicate key", "{\"contexts\": {\"alice\": {},\n\"alice\": {}}}", `2: contexts["alice"]: the same context is already listed on line 1`},
		{"field twice", "{\"contexts\": {},\n\"contexts\": {}}", `2: field "contexts" appears twice`},
		{"synchronizedOn not a number", "{\"synchronizedOn\": \"yesterday\"}", `1: synchronizedOn: want unix milliseconds (an integer), found string`},
		{"entry not an object", "{\"contexts\": {\"alice\": [\"a\"]}}", `1: contexts["alice"]: want an object like`},
		{"refs not an array", "{\"contexts\": {\"alice\": {\"excluded\": \"a\"}}}", `1: contexts["alice"].excluded: want an array of segment refs (strings), found string`},
		{"synchronizedOn negative", "{\"synchronizedOn\": -5}", `1: synchronizedOn: negative`},
		{"synchronizedOn fractional", "{\"synchronizedOn\": 1.5}", `1: synchronizedOn: want unix milliseconds (an integer), found number 1.5`},
		{"trailing data", "{}\n{}", `2: unexpected data after the fixture object`},
		{"truncated", "{\"contexts\": {\"alice\": {\"included\": [", `1: contexts["alice"]: unexpected end of file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := memory.ParseFixture([]byte(tt.data))
			if err == nil {
				t.Fatalf("parsed %d contexts, want error %q", len(f.Contexts), tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %q, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestExampleFixture(t *testing.T) {
	f, err := memory.ReadFixtureFile("../../examples/memberships.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Contexts) < 3 {
		t.Errorf("example has %d contexts, want a few", len(f.Contexts))
	}
}

func FuzzParseFixture(f *testing.F) {
	f.Add([]byte(`{"synchronizedOn":1,"contexts":{"a":{"included":["x"],"excluded":["y"]}}}`))
	f.Add([]byte(`{"hashedContexts":{"` + segments.Hash("a") + `":{}}}`))
	f.Add([]byte(`{"contexts":{"a":{"included":[1]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fx, err := memory.ParseFixture(data)
		if err != nil {
			if !strings.Contains(err.Error(), ": ") {
				t.Errorf("error without a line: %q", err)
			}
			return
		}
		for _, c := range fx.Contexts {
			if err := segments.ValidateHash(c.Hash); err != nil {
				t.Errorf("accepted context with bad hash %q: %v", c.Hash, err)
			}
			if c.Key != "" && segments.Hash(c.Key) != c.Hash {
				t.Errorf("hash of %q is %q, want %q", c.Key, c.Hash, segments.Hash(c.Key))
			}
		}
	})
}
