package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/bigseg/bigseg/segments"
)

// writeJSON writes v as the JSON body of every answer but lookups' (see encoder). No answer
// may be cached: lookups are personal data, and the rest changes from moment to moment.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only ever our own types: a bug
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	setJSONHeaders(w.Header())
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// flushSize is how much of an answer is buffered before it is passed on: what one answer,
// however large, costs in memory.
const flushSize = 32 << 10

// smallAnswer is the size up to which net/http sets Content-Length itself.
const smallAnswer = 2048

// storeErrorMessage is what lookups' callers see of a failed read; explain gives its cause.
const storeErrorMessage = "the Big Segment store could not be read"

// encoder writes lookups' answers by hand (the hot path, of a fixed shape, where encoding/json
// needs reflection; a test compares the two) into a pooled buffer, passed on at flushSize:
// an answer that fits is one write with its Content-Length, a larger one is chunked.
type encoder struct {
	w       http.ResponseWriter
	code    int
	pooled  *[]byte
	b       []byte
	started bool // the status and headers are written
}

func newEncoder(w http.ResponseWriter, code int) *encoder {
	bp := bufs.Get().(*[]byte)
	return &encoder{w: w, code: code, pooled: bp, b: (*bp)[:0]}
}

// setJSONHeaders sets a JSON answer's headers, values of its own (a slice shared by every
// response could be changed through any) in one allocation, not Header.Set's two.
func setJSONHeaders(h http.Header) {
	v := []string{"application/json", "no-store"}
	h["Content-Type"], h["Cache-Control"] = v[0:1:1], v[1:2:2]
}

func (e *encoder) flushIfFull() {
	if len(e.b) >= flushSize {
		e.write()
	}
}

func (e *encoder) write() {
	if !e.started {
		setJSONHeaders(e.w.Header())
		e.w.WriteHeader(e.code)
		e.started = true
	}
	_, _ = e.w.Write(e.b)
	e.b = e.b[:0]
}

// close ends the answer with a newline and sends what is left.
func (e *encoder) close() {
	e.b = append(e.b, '\n')
	if !e.started && len(e.b) > smallAnswer {
		e.w.Header()["Content-Length"] = []string{strconv.Itoa(len(e.b))}
	}
	e.write()
	if cap(e.b) <= 2*flushSize {
		*e.pooled = e.b
		bufs.Put(e.pooled)
	}
}

// result appends one lookup's JSON object; key is "" for a lookup by hash (keys are never
// empty), and then omitted.
func (e *encoder) result(key string, r segments.Answer) {
	b := append(e.b, '{')
	if key != "" {
		b = append(b, `"contextKey":`...)
		b = appendString(b, key)
		b = append(b, ',')
	}
	b = append(b, `"contextHash":`...)
	b = appendString(b, r.ContextHash)
	if r.Err == nil {
		e.b = append(b, `,"memberships":`...)
		e.memberships(r.Membership)
		b = e.b
	}
	b = append(b, `,"status":"`...)
	b = append(b, r.Status...)
	b = append(b, '"')
	if r.Err != nil {
		b = append(b, `,"error":"`+storeErrorMessage+`"`...)
	}
	e.b = append(b, '}')
}

// memberships appends m as a JSON object of ref to true (included) or false (excluded), passing
// the buffer on as it fills.
func (e *encoder) memberships(m segments.Membership) {
	b, sep := append(e.b, '{'), ""
	for ref, included := range m.All() {
		b = strconv.AppendBool(append(appendString(append(b, sep...), ref), ':'), included)
		sep = ","
		e.b = b
		e.flushIfFull()
		b = e.b
	}
	e.b = append(b, '}')
}

// refs appends the refs of m that are included (or, with included false, excluded) as a JSON
// array of strings, passing the buffer on as it fills.
func (e *encoder) refs(m segments.Membership, included bool) {
	e.b = append(e.b, '[')
	sep := ""
	for ref, in := range m.All() {
		if in == included {
			e.b = appendString(append(e.b, sep...), ref)
			sep = ","
			e.flushIfFull()
		}
	}
	e.b = append(e.b, ']')
}

// list appends ss as a JSON array of strings, passing the buffer on as it fills.
func (e *encoder) list(ss []string) {
	e.b = append(e.b, '[')
	for i, s := range ss {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = appendString(e.b, s)
		e.flushIfFull()
	}
	e.b = append(e.b, ']')
}

// value appends v as encoding/json writes it: for the small, fixed parts of an answer.
func (e *encoder) value(v any) {
	b, err := json.Marshal(v)
	if err != nil { // only ever our own types: a bug
		b = []byte("null")
	}
	e.b = append(e.b, b...)
}

// raw appends s as it is.
func (e *encoder) raw(s string) { e.b = append(e.b, s...) }

const hexDigits = "0123456789abcdef"

// plain marks the bytes that appendString copies as they are: ASCII from the space up, except
// the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString appends s as a JSON string as encoding/json escapes it without HTML escaping:
// quotes, backslashes, control characters, U+2028 and U+2029; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			if j := strings.IndexByte("\"\\\n\r\t\b\f", c); j >= 0 {
				b = append(b, '\\', "\"\\nrtbf"[j])
			} else {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
