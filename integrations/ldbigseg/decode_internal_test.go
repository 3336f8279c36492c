package ldbigseg

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"strings"
	"testing"
)

// FuzzDecodeLookup checks that decodeLookup decodes an answer as encoding/json decodes it into
// the struct the store used before it had bounds: the same fields, refs, escapes, bytes that
// are not UTF-8, repeated fields and names in other cases; or an error where encoding/json
// fails. The differences are on purpose: a membership that is null, and an answer that is not
// an object, are errors; and so is what bigseg never sends and the decoder bounds (a field
// nested too deep, a field name or a string field over 4 KiB, a number over 64 bytes).
func FuzzDecodeLookup(f *testing.F) {
	for _, seed := range []string{
		`{"contextHash":"YeoIA/iFNSO3d9QUrOMTDNTT+S3izX/4aVwzfXnC7u4=","memberships":{"beta.g3":true,"blocked.g1":false},"status":"HEALTHY"}`,
		`{"memberships":{},"status":"STALE"}`, `{}`, `null`, `[]`, `"a"`, ` { "memberships" : { "a" : false , "b":true } } `,
		"\t{\n\"memberships\"\r:{\"a\":true}}\n", `{"memberships":{"a\u0041":true,"\ud83d\ude00":true,"é":false}}`,
		"{\"memberships\":{\"\xff\":true}}", `{"memberships":{"\"":true,"\\":false,"\/":true}}`,
		`{"memberships":{"a":true,"a":false}}`, `{"memberships":{"a":true},"memberships":{"b":false}}`,
		`{"memberships":{"a":true},"memberships":null}`, `{"MEMBERSHIPS":{"a":true},"Status":"HEALTHY","contexthash":"x"}`,
		`{"memberships":{"a":null}}`, `{"memberships":null}`, `{"memberships":[]}`, `{"memberships":{"a":1}}`,
		`{"memberships":{"a":"true"}}`, `{"memberships":{"a":{"b":true}}}`, `{"status":null}`, `{"status":1}`,
		`{"cursor":"x","n":-1.5e+3,"o":{"a":[1,{"b":null},"c"]},"t":true,"e":[]}`, `{"n":01}`, `{"n":1.}`,
		`{"memberships":{"a":true}} x`, `{"memberships":{"a":true},}`, `{"memberships":{"a\x01":true}}`,
		`{"memberships":{"\u12":true}}`, `{"memberships":{"\q":true}}`, `{"memberships":{"a":tru}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want struct {
			ContextHash string          `json:"contextHash"`
			Memberships map[string]bool `json:"memberships"`
			Status      string          `json:"status"`
		}
		wantErr := json.Unmarshal(data, &want)
		got, err := decodeLookup(bytes.NewReader(data), bounds{maxRefs: math.MaxInt, maxRefBytes: math.MaxInt})
		if err != nil && wantErr == nil {
			msg := err.Error()
			switch {
			case strings.Contains(msg, "a membership is not true or false") && bytes.Contains(data, []byte("null")),
				strings.Contains(msg, "where an object was expected") && string(bytes.TrimSpace(data)) == "null",
				strings.Contains(msg, "nested too deep"), strings.Contains(msg, "longer than the store reads"):
				return // on purpose
			}
		}
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, encoding/json's %v", data, err, wantErr)
		}
		if err != nil {
			return
		}
		if got.contextHash != want.ContextHash || got.status != want.Status {
			t.Errorf("%q: contextHash %q, status %q; encoding/json's %q, %q", data, got.contextHash, got.status, want.ContextHash, want.Status)
		}
		if !maps.Equal(got.refs, want.Memberships) || (got.refs == nil) != (want.Memberships == nil) {
			t.Errorf("%q: refs %v; encoding/json's %v", data, got.refs, want.Memberships)
		}
	})
}
