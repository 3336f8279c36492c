package handlers

import (
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/bigseg/bigseg/segments"
)

// Lookup responses are encoded by hand: they are the hot path, their shape is fixed, and
// encoding/json would need a map per response and reflection to build it. A test checks the
// output against encoding/json's.

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// storeErrorMessage is what callers see of a failed read; the cause is logged.
const storeErrorMessage = "the Big Segment store could not be read"

// appendResult appends one lookup's JSON object. key is omitted when byHash.
func appendResult(b []byte, byHash bool, key string, r segments.Result) []byte {
	b = append(b, '{')
	if !byHash {
		b = append(b, `"contextKey":`...)
		b = appendString(b, key)
		b = append(b, ',')
	}
	b = append(b, `"contextHash":`...)
	b = appendString(b, r.ContextHash)
	if r.Err == nil {
		b = append(b, `,"memberships":{`...)
		first := true
		for ref, included := range r.Membership.All() {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendString(b, ref)
			if included {
				b = append(b, ":true"...)
			} else {
				b = append(b, ":false"...)
			}
		}
		b = append(b, '}')
	}
	b = append(b, `,"status":"`...)
	b = append(b, r.Status...)
	b = append(b, '"')
	if r.Err != nil {
		b = append(b, `,"error":"`+storeErrorMessage+`"`...)
	}
	return append(b, '}')
}

// Header values shared by every response: net/http only reads them, and sharing saves an
// allocation per response.
var (
	jsonContentType = []string{"application/json"}
)

// writeBody writes a JSON body built by fill into a pooled buffer.
func writeBody(w http.ResponseWriter, code int, fill func([]byte) []byte) {
	bp := bufs.Get().(*[]byte)
	b := fill((*bp)[:0])
	b = append(b, '\n')
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(code)
	_, _ = w.Write(b)
	if cap(b) <= 64<<10 { // let big batch buffers go
		*bp = b
		bufs.Put(bp)
	}
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json does without HTML
// escaping: quotes, backslashes and control characters escaped, invalid UTF-8 replaced by
// U+FFFD, and U+2028 and U+2029 escaped for JavaScript's sake.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
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
