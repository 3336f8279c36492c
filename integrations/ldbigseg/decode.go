package ldbigseg

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// lookup is a lookup answer (GET /memberships?contextHash=) as decodeLookup reads it.
type lookup struct {
	contextHash string
	status      string
	refs        map[string]bool // nil: no "memberships", or null
}

// Limits of the decoder on what bigseg never sends, so that no part of an answer is unbounded.
const (
	maxFieldBytes  = envelopeBytes // a field name, the context hash, the status (as JSON)
	maxNumberBytes = 64            // a number, in a field this version does not know
	maxDepth       = 32            // the nesting of a field this version does not know
)

// decodeLookup reads one lookup answer from r as it arrives, holding its memberships to b as
// it reads them: it stops at the first segment ref over a bound, with an error wrapping
// ErrAnswerTooLarge, so an answer over the bounds is never read further, let alone kept. What
// it holds meanwhile is the refs within the bounds, the ref being read (at most 6 ×
// MaxRefBytes of JSON) and a 4 KiB buffer.
//
// It decodes as encoding/json decodes the answer into a struct of a string "contextHash", a
// map[string]bool "memberships" and a string "status" (what the store did before it had
// bounds): field names matched without regard to case, the last of a repeated field winning
// (repeated memberships merge, and count towards the bounds together), strings unescaped with
// bytes that are not UTF-8 replaced, other fields skipped; except that a membership must be
// true or false (encoding/json takes null for false), and that the answer must be an object.
// FuzzDecodeLookup checks it against encoding/json.
//
// It is written by hand for what encoding/json's two shapes of it cost (BenchmarkGetMembership
// with bench/ab/ldbigseg-unmarshal.patch or bench/ab/ldbigseg-tokens.patch; BENCHMARKS.md,
// "The hand-made defences"): json.Unmarshal of the bounded body, checked afterwards, keeps
// what the SDK keeps within the bounds, but reads and decodes a hostile answer whole before
// refusing it (79 x the CPU and 43 x the bytes of stopping at the first ref over a bound);
// json.Decoder.Token stops where this does, at 1.8 to 3.3 x the CPU of a lookup of 10 to
// 1,000 refs.
func decodeLookup(r io.Reader, b bounds) (lookup, error) {
	d := &decoder{r: bufio.NewReader(r), bounds: b}
	var l lookup
	err := d.object(d.fieldName, func(name string) error {
		switch {
		case strings.EqualFold(name, "memberships"):
			return d.memberships(&l.refs)
		case strings.EqualFold(name, "contextHash"):
			return d.stringOrNull(&l.contextHash)
		case strings.EqualFold(name, "status"):
			return d.stringOrNull(&l.status)
		default:
			return d.skip(0)
		}
	})
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return lookup{}, err
	}
	return l, nil
}

// decoder reads JSON from r one byte at a time. Errors of r are returned as they are.
type decoder struct {
	r *bufio.Reader
	bounds
	refs, refBytes int    // the refs read so far, and their bytes
	buf            []byte // the JSON of the string being read
}

var (
	errEnd     = errors.New("the answer ends early")
	errTooLong = errors.New("a string longer than the store reads")
)

// next returns the next byte that is not JSON white space; errEnd at the end.
func (d *decoder) next() (byte, error) {
	for {
		c, err := d.r.ReadByte()
		if err == io.EOF {
			return 0, errEnd
		} else if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

// unexpected describes byte c where something else was expected. It quotes only c, never
// more of the answer.
func unexpected(c byte, want string) error {
	return fmt.Errorf("%q where %s was expected", c, want)
}

// expect reads the next byte that is not white space, which must be want.
func (d *decoder) expect(want byte, what string) error {
	c, err := d.next()
	if err == nil && c != want {
		err = unexpected(c, what)
	}
	return err
}

// end checks that nothing but white space follows.
func (d *decoder) end() error {
	c, err := d.next()
	if err == errEnd {
		return nil
	} else if err != nil {
		return err
	}
	return unexpected(c, "the end of the answer")
}

// object reads an object: each field's name with name (after its opening quote), and its
// value with value.
func (d *decoder) object(name func() (string, error), value func(name string) error) error {
	if err := d.expect('{', "an object"); err != nil {
		return err
	}
	c, err := d.next()
	if err != nil || c == '}' {
		return err
	}
	for {
		if c != '"' {
			return unexpected(c, "a field name")
		}
		n, err := name()
		if err != nil {
			return err
		}
		if err := d.expect(':', "':'"); err != nil {
			return err
		}
		if err := value(n); err != nil {
			return err
		}
		if c, err = d.next(); err != nil {
			return err
		}
		switch c {
		case '}':
			return nil
		case ',':
		default:
			return unexpected(c, "',' or '}'")
		}
		if c, err = d.next(); err != nil {
			return err
		}
	}
}

// fieldName reads the name of a field of the answer.
func (d *decoder) fieldName() (string, error) { return d.str(maxFieldBytes, true) }

// memberships reads the memberships into refs (null makes it nil, as encoding/json does).
func (d *decoder) memberships(refs *map[string]bool) error {
	c, err := d.next()
	if err != nil {
		return err
	}
	if c == 'n' {
		*refs = nil
		return d.literal("ull")
	}
	if err := d.r.UnreadByte(); err != nil {
		return err
	}
	if *refs == nil {
		*refs = map[string]bool{}
	}
	return d.object(d.ref, func(ref string) error {
		c, err := d.next()
		switch {
		case err != nil:
			return err
		case c == 't':
			(*refs)[ref] = true
			return d.literal("rue")
		case c == 'f':
			(*refs)[ref] = false
			return d.literal("alse")
		default:
			return errors.New("a membership is not true or false")
		}
	})
}

// ref reads a segment ref, counting it and its bytes against the bounds. A ref over them is
// not read further than the bound: the next ref over MaxRefs is not read at all, and a ref
// whose JSON is over 6 × the bytes left (every byte escaped) cannot fit.
func (d *decoder) ref() (string, error) {
	if d.refs >= d.maxRefs {
		return "", &overBound{fmt.Sprintf("more than %d segment refs (MaxRefs)", d.maxRefs)}
	}
	left := d.maxRefBytes - d.refBytes
	maxJSON := math.MaxInt
	if left <= math.MaxInt/6 {
		maxJSON = 6 * left
	}
	ref, err := d.str(maxJSON, true)
	if err == nil {
		d.refs, d.refBytes = d.refs+1, d.refBytes+len(ref)
	}
	if err == errTooLong || d.refBytes > d.maxRefBytes {
		return "", &overBound{fmt.Sprintf("more than %d bytes of segment refs (MaxRefBytes)", d.maxRefBytes)}
	}
	return ref, err
}

// stringOrNull reads a string into s, or null, which leaves s as it is (as encoding/json does).
func (d *decoder) stringOrNull(s *string) error {
	c, err := d.next()
	switch {
	case err != nil:
		return err
	case c == 'n':
		return d.literal("ull")
	case c != '"':
		return unexpected(c, "a string")
	}
	*s, err = d.str(maxFieldBytes, true)
	return err
}

// literal reads the rest of true, false or null.
func (d *decoder) literal(rest string) error {
	for i := 0; i < len(rest); i++ {
		c, err := d.r.ReadByte()
		if err == io.EOF {
			return errEnd
		} else if err != nil {
			return err
		}
		if c != rest[i] {
			return unexpected(c, fmt.Sprintf("%q", rest[i]))
		}
	}
	return nil
}

// str reads a string after its opening quote, of at most max bytes of JSON between its
// quotes (else errTooLong), and decodes it if keep.
func (d *decoder) str(max int, keep bool) (string, error) {
	// The common case, at memory speed: the string is in the buffer, plain UTF-8 text.
	if d.r.Buffered() == 0 {
		d.r.Peek(1) // fills the buffer; an error is the byte-by-byte path's to return
	}
	buf, _ := d.r.Peek(d.r.Buffered())
	if i := bytes.IndexByte(buf, '"'); i >= 0 && i <= max && plain(buf[:i]) {
		var s string
		if keep {
			s = string(buf[:i])
		}
		_, err := d.r.Discard(i + 1)
		return s, err
	}
	// Else byte by byte.
	d.buf = append(d.buf[:0], '"')
	n, escaped := 0, false
	for {
		c, err := d.r.ReadByte()
		if err == io.EOF {
			return "", errEnd
		} else if err != nil {
			return "", err
		}
		if c == '"' {
			break
		}
		if n++; n > max {
			return "", errTooLong
		}
		switch {
		case c < 0x20:
			return "", errors.New("a control character in a string")
		case c == '\\':
			escaped = true
			more, err := d.escape(keep)
			if err != nil {
				return "", err
			}
			if n += more; n > max {
				return "", errTooLong
			}
			continue
		}
		if keep {
			d.buf = append(d.buf, c)
		}
	}
	if !keep {
		return "", nil
	}
	d.buf = append(d.buf, '"')
	if inner := d.buf[1 : len(d.buf)-1]; !escaped && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(d.buf, &s) // escapes, and bytes that are not UTF-8, as encoding/json does
	return s, err
}

// plain reports whether b is a string's JSON that is its own value: UTF-8 text without escapes
// or control characters.
func plain(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	return utf8.Valid(b)
}

// escape reads what follows a backslash in a string, checks it, and returns how many bytes
// it read.
func (d *decoder) escape(keep bool) (int, error) {
	c, err := d.r.ReadByte()
	if err == io.EOF {
		return 0, errEnd
	} else if err != nil {
		return 0, err
	}
	if strings.IndexByte(`"\/bfnrtu`, c) < 0 {
		return 0, errors.New("an invalid escape in a string")
	}
	if keep {
		d.buf = append(d.buf, '\\', c)
	}
	if c != 'u' {
		return 1, nil
	}
	for range 4 {
		if c, err = d.r.ReadByte(); err == io.EOF {
			return 0, errEnd
		} else if err != nil {
			return 0, err
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return 0, errors.New("an invalid escape in a string")
		}
		if keep {
			d.buf = append(d.buf, c)
		}
	}
	return 5, nil
}

// skip reads a value of a field this version does not know, and checks it is valid JSON,
// keeping nothing of it.
func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return errors.New("a field nested too deep")
	}
	c, err := d.next()
	if err != nil {
		return err
	}
	switch {
	case c == '{':
		if err := d.r.UnreadByte(); err != nil {
			return err
		}
		discard := func() (string, error) { return d.str(math.MaxInt, false) }
		return d.object(discard, func(string) error { return d.skip(depth + 1) })
	case c == '[':
		if c, err = d.next(); err != nil || c == ']' {
			return err
		}
		if err := d.r.UnreadByte(); err != nil {
			return err
		}
		for {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			if c, err = d.next(); err != nil || c == ']' {
				return err
			}
			if c != ',' {
				return unexpected(c, "',' or ']'")
			}
		}
	case c == '"':
		_, err := d.str(math.MaxInt, false)
		return err
	case c == 't':
		return d.literal("rue")
	case c == 'f':
		return d.literal("alse")
	case c == 'n':
		return d.literal("ull")
	case c == '-' || '0' <= c && c <= '9':
		return d.number(c)
	default:
		return unexpected(c, "a value")
	}
}

// number reads a number whose first byte is c, and checks it.
func (d *decoder) number(c byte) error {
	num := []byte{c}
	for {
		c, err := d.r.ReadByte()
		if err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		if strings.IndexByte("0123456789+-.eE", c) < 0 {
			if err := d.r.UnreadByte(); err != nil {
				return err
			}
			break
		}
		if num = append(num, c); len(num) > maxNumberBytes {
			return errors.New("a number longer than the store reads")
		}
	}
	if !json.Valid(num) {
		return errors.New("an invalid number")
	}
	return nil
}
