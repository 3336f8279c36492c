package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"time"
	"unicode/utf8"

	"github.com/bigseg/bigseg/segments"
)

// Fixture is a set of Big Segment memberships in the JSON format of examples/memberships.json:
//
//	{
//	  "synchronizedOn": 1764430000000,
//	  "contexts": {
//	    "alice": {"included": ["beta-users.g3"], "excluded": ["blocked.g1"]}
//	  },
//	  "hashedContexts": {
//	    "<base64 of SHA-256 of the key>": {"included": ["vip.g1"]}
//	  }
//	}
//
// Every field is optional. "contexts" lists contexts by key, "hashedContexts" by hash (for data
// exported from a store, where keys are not known). "synchronizedOn" is unix milliseconds; when
// it is absent, whoever loads the fixture counts the load time as the synchronization time.
type Fixture struct {
	// SynchronizedOn is the synchronization time given in the file, nil when absent. A value of
	// 0 means never synchronized and is the zero time.
	SynchronizedOn *time.Time
	// Contexts holds the entries of "contexts" then "hashedContexts", each in file order.
	Contexts []Context
}

// Context is one context's entry in a Fixture.
type Context struct {
	// Key is the context key; empty for an entry of "hashedContexts".
	Key string
	// Hash is the context hash, computed from Key for an entry of "contexts".
	Hash     string
	Included []string
	Excluded []string
	// Line is the line of the file the entry starts on, for messages about it.
	Line int
}

// Membership returns the entry's membership.
func (c Context) Membership() segments.Membership {
	return segments.NewMembership(c.Included, c.Excluded)
}

// ReadFixtureFile reads and validates the fixture at path; see ParseFixture.
func ReadFixtureFile(path string) (*Fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read fixture: %w", err)
	}
	f, err := ParseFixture(data)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return f, nil
}

// ParseFixture parses and validates a whole fixture, or returns an error that starts with the
// line at fault ("12: contexts[\"bob\"].included[1]: empty segment ref"). Nothing is returned
// for a fixture with any fault, so that no caller acts on half a file.
func ParseFixture(data []byte) (*Fixture, error) {
	p := &parser{data: data, dec: json.NewDecoder(bytes.NewReader(data)), line: 1}
	p.dec.DisallowUnknownFields()
	f, err := p.fixture()
	if err != nil {
		return nil, err
	}
	return f, nil
}

type parser struct {
	data    []byte
	dec     *json.Decoder
	line    int   // line at offset lineOff
	lineOff int64 // offsets only grow, so lines are counted once
}

// lineAt returns the line of byte offset off, counting from the last offset asked for.
func (p *parser) lineAt(off int64) int {
	off = min(max(off, p.lineOff), int64(len(p.data)))
	p.line += bytes.Count(p.data[p.lineOff:off], []byte{'\n'})
	p.lineOff = off
	return p.line
}

// startOf returns the line where the next value starts, skipping whitespace and separators.
func (p *parser) startOf() int {
	off := p.dec.InputOffset()
	for off < int64(len(p.data)) {
		switch p.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return p.lineAt(off)
}

func (p *parser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("%d: %s", line, fmt.Sprintf(format, args...))
}

// wrap turns a decoding error into one with a line.
func (p *parser) wrap(line int, where string, err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return p.errorf(p.lineAt(syn.Offset), "%s: invalid JSON: %v", where, err)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		want := "an array of segment refs (strings)"
		switch {
		case typ.Type.Kind() == reflect.Int64:
			want = "unix milliseconds (an integer)"
		case typ.Field == "":
			want = `an object like {"included": [...], "excluded": [...]}`
		case typ.Type.Kind() == reflect.String:
			want = "a string"
		}
		field := where
		if typ.Field != "" && where != typ.Field {
			field += "." + typ.Field
		}
		return p.errorf(line, "%s: want %s, found %s", field, want, typ.Value)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return p.errorf(p.lineAt(int64(len(p.data))), "%s: unexpected end of file", where)
	}
	return p.errorf(line, "%s: %v", where, err)
}

func (p *parser) delim(want json.Delim, where string) error {
	line := p.startOf()
	tok, err := p.dec.Token()
	if err != nil {
		return p.wrap(line, where, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return p.errorf(line, "%s: expected %q, found %v", where, string(want), describe(tok))
	}
	return nil
}

func describe(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(t))
	case string:
		return fmt.Sprintf("string %q", t)
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%v", t)
	}
}

func (p *parser) fixture() (*Fixture, error) {
	if err := p.delim('{', "fixture"); err != nil {
		return nil, err
	}
	f := &Fixture{}
	seen := map[string]bool{}
	byHash := map[string]int{} // hash -> line of its entry
	for p.dec.More() {
		line := p.startOf()
		tok, err := p.dec.Token()
		if err != nil {
			return nil, p.wrap(line, "fixture", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, p.errorf(line, "field %q appears twice", name)
		}
		seen[name] = true
		switch name {
		case "synchronizedOn":
			line := p.startOf()
			var ms int64
			if err := p.dec.Decode(&ms); err != nil {
				return nil, p.wrap(line, "synchronizedOn", err)
			}
			if ms < 0 {
				return nil, p.errorf(line, "synchronizedOn: negative")
			}
			var t time.Time
			if ms > 0 {
				t = time.UnixMilli(ms)
			}
			f.SynchronizedOn = &t
		case "contexts", "hashedContexts":
			if err := p.contexts(f, name, byHash); err != nil {
				return nil, err
			}
		default:
			return nil, p.errorf(line, "unknown field %q (want synchronizedOn, contexts or hashedContexts)", name)
		}
	}
	if err := p.delim('}', "fixture"); err != nil {
		return nil, err
	}
	line := p.startOf()
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, p.errorf(line, "unexpected data after the fixture object")
	}
	return f, nil
}

type entryJSON struct {
	Included []string `json:"included"`
	Excluded []string `json:"excluded"`
}

func (p *parser) contexts(f *Fixture, field string, byHash map[string]int) error {
	if err := p.delim('{', field); err != nil {
		return err
	}
	hashed := field == "hashedContexts"
	for p.dec.More() {
		line := p.startOf()
		tok, err := p.dec.Token()
		if err != nil {
			return p.wrap(line, field, err)
		}
		name := tok.(string) // object keys are always strings
		where := fmt.Sprintf("%s[%q]", field, name)
		c := Context{Line: line}
		if hashed {
			if err := segments.ValidateHash(name); err != nil {
				return p.errorf(line, "%s: %v", where, err)
			}
			c.Hash = name
		} else {
			if name == "" {
				return p.errorf(line, "%s: context key is empty", where)
			}
			if !utf8.ValidString(name) {
				return p.errorf(line, "%s: context key is not valid UTF-8", where)
			}
			c.Key, c.Hash = name, segments.Hash(name)
		}
		if prev, ok := byHash[c.Hash]; ok {
			return p.errorf(line, "%s: the same context is already listed on line %d", where, prev)
		}
		byHash[c.Hash] = line

		var e entryJSON
		vline := p.startOf()
		if err := p.dec.Decode(&e); err != nil {
			return p.wrap(vline, where, err)
		}
		for i, r := range e.Included {
			if r == "" {
				return p.errorf(vline, "%s.included[%d]: empty segment ref", where, i)
			}
		}
		for i, r := range e.Excluded {
			if r == "" {
				return p.errorf(vline, "%s.excluded[%d]: empty segment ref", where, i)
			}
		}
		c.Included, c.Excluded = e.Included, e.Excluded
		f.Contexts = append(f.Contexts, c)
	}
	return p.delim('}', field)
}
