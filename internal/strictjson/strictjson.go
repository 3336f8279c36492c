// Package strictjson refuses the JSON that encoding/json would accept by changing it: invalid
// UTF-8 and lone UTF-16 surrogate escapes (which it decodes as U+FFFD, so that two different
// keys become one), and object field names that are repeated or differ in case from the ones
// expected (which it matches case-insensitively, the last one winning).
package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// TextError is the error of CheckText: what is wrong, and at which byte offset.
type TextError struct {
	Offset int
	What   string
}

func (e *TextError) Error() string { return fmt.Sprintf("%s at byte %d", e.What, e.Offset) }

// CheckText reports the first place where data holds invalid UTF-8 or a \u escape of a lone
// UTF-16 surrogate, as a *TextError, or nil. It does not check that data is valid JSON.
func CheckText(data []byte) error {
	if !utf8.Valid(data) {
		for i := 0; i < len(data); {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return &TextError{i, "invalid UTF-8"}
			}
			i += size
		}
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			continue
		}
		if data[i+1] != 'u' {
			i++ // an escaped character: \\ must not start an escape
			continue
		}
		r, ok := hex4(data, i+2)
		switch {
		case !ok || !utf16.IsSurrogate(r):
		case r >= 0xDC00: // a low surrogate with no high one before it
			return &TextError{i, fmt.Sprintf("lone UTF-16 surrogate \\u%04x", r)}
		default:
			low, ok := rune(0), i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u'
			if ok {
				low, ok = hex4(data, i+8)
			}
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return &TextError{i, fmt.Sprintf("lone UTF-16 surrogate \\u%04x", r)}
			}
			i += 6 // past the high surrogate; the loop steps over the low one's backslash
		}
	}
	return nil
}

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[at:at+4]), 16, 16)
	return rune(n), err == nil
}

// ErrNotObject is returned by Object when the value is not a JSON object (null included).
var ErrNotObject = errors.New("not a JSON object")

// Object reads one JSON object from dec, calling field with each field's name (exactly as
// written) for it to decode the value with dec.Decode. A name that field does not know must
// make it return an error; a name that appears twice is an error here.
func Object(dec *json.Decoder, field func(name string) error) error {
	seen := map[string]bool{}
	return Members(dec, func(name string) error {
		if seen[name] {
			return fmt.Errorf("field %q appears twice", name)
		}
		seen[name] = true
		return field(name)
	})
}

// Members reads one JSON object from dec as Object does, but leaves repeated names to member:
// for objects used as maps, where the caller can say better what a repeated key means.
func Members(dec *json.Decoder, member func(name string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return ErrNotObject
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if err := member(tok.(string)); err != nil { // object keys are always strings
			return err
		}
	}
	_, err = dec.Token() // the closing brace: More said there is nothing else
	return err
}
