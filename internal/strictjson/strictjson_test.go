package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckText(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
	}{
		{`{"contextKeys":["zoë","日本語","🎉"]}`, ""},
		{`["\ud83c\udf89"]`, ""}, // a surrogate pair: 🎉
		{`["\\ud800"]`, ""},      // an escaped backslash, then "ud800": no escape
		{`["\u00e9\n\"\\"]`, ""}, // other escapes
		{`["\ud800"]`, "lone UTF-16 surrogate \\ud800 at byte 2"},
		{`["\udc00"]`, "lone UTF-16 surrogate \\udc00 at byte 2"},
		{`["\ud800\u0041"]`, "lone UTF-16 surrogate \\ud800 at byte 2"},
		{`["\ud800x"]`, "lone UTF-16 surrogate \\ud800 at byte 2"},
		{`["\ud83c\udf89\udc00"]`, "lone UTF-16 surrogate \\udc00 at byte 14"},
		{"[\"a\xff\"]", "invalid UTF-8 at byte 3"},
		{`["\ud8`, ""}, // truncated: not a surrogate this can see; the JSON decoder refuses it
	}
	for _, tt := range tests {
		err := CheckText([]byte(tt.in))
		if (err == nil) != (tt.wantErr == "") || err != nil && err.Error() != tt.wantErr {
			t.Errorf("CheckText(%q) = %v, want %q", tt.in, err, tt.wantErr)
		}
	}
}

func TestObject(t *testing.T) {
	decode := func(in string) (map[string][]string, error) {
		got := map[string][]string{}
		dec := json.NewDecoder(strings.NewReader(in))
		err := Object(dec, func(name string) error {
			if name != "a" && name != "b" {
				return errors.New("unknown field " + name)
			}
			var v []string
			err := dec.Decode(&v)
			got[name] = v
			return err
		})
		return got, err
	}
	tests := []struct {
		in      string
		want    int // fields decoded
		wantErr string
	}{
		{`{"a":["x"],"b":[]}`, 2, ""},
		{`{}`, 0, ""},
		{`null`, 0, "not a JSON object"},
		{`["a"]`, 0, "not a JSON object"},
		{`{"a":[],"a":["x"]}`, 1, `field "a" appears twice`},
		{`{"A":[]}`, 0, "unknown field A"},
		{`{"a":[1]}`, 1, "json: cannot unmarshal number into Go value of type string"},
	}
	for _, tt := range tests {
		got, err := decode(tt.in)
		if (err == nil) != (tt.wantErr == "") || err != nil && err.Error() != tt.wantErr || len(got) != tt.want {
			t.Errorf("Object(%s) decoded %v, err %v; want %d fields, err %q", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
