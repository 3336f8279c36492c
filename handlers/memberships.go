package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/bigseg/bigseg/internal/strictjson"
	"github.com/bigseg/bigseg/segments"
)

// getMembership serves GET /memberships/{contextKey}.
func (s *server) getMembership() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, err := s.pathKey(r)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.lookup(w, r, key, segments.Hash(key))
	}
}

// lookup answers for one context, once it takes a lookup slot. key is "" for a lookup by hash.
func (s *server) lookup(w http.ResponseWriter, r *http.Request, key, hash string) {
	release, ok := s.admit(w, r)
	if !ok {
		return
	}
	res := s.svc.LookupHash(r.Context(), hash)
	release() // before writing: a client that reads slowly holds no slot
	writeLookup(w, key, res)
}

// pathKey returns the context key of the request path. chi matches on the escaped path when
// the request had escapes that matter (RawPath set, as for "%2F"), and then hands over the
// still-escaped value; otherwise the value is already unescaped. So unescape exactly once.
func (s *server) pathKey(r *http.Request) (string, error) {
	key := chi.URLParam(r, "contextKey")
	if r.URL.RawPath != "" {
		var err error
		if key, err = url.PathUnescape(key); err != nil {
			return "", errors.New("context key is not validly percent-encoded")
		}
	}
	return key, s.validKey(key)
}

func (s *server) validKey(key string) error {
	switch {
	case key == "":
		return errors.New("context key is empty")
	case len(key) > s.maxKeyBytes:
		return fmt.Errorf("context key is longer than %d bytes", s.maxKeyBytes)
	case !utf8.ValidString(key):
		return errors.New("context key is not valid UTF-8")
	}
	return nil
}

// getMembershipByHash serves GET /memberships?contextHash=..., the lookup an SDK's Big
// Segment store makes, since it only ever has the hash.
func (s *server) getMembershipByHash() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			writeError(w, http.StatusBadRequest, "query string is not validly encoded")
			return
		}
		hashes, ok := q["contextHash"]
		if !ok {
			writeError(w, http.StatusBadRequest, "contextHash query parameter is required (or use /memberships/{contextKey})")
			return
		}
		if len(hashes) != 1 {
			writeError(w, http.StatusBadRequest, "give contextHash once; POST /memberships looks up many")
			return
		}
		hash, err := normalizeHash(hashes[0])
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.lookup(w, r, "", hash)
	}
}

// normalizeHash validates a hash from a query string. A '+' that was not escaped arrives as a
// space; a space is never part of base64, so it is taken back as the '+' the caller meant.
func normalizeHash(h string) (string, error) {
	h = strings.ReplaceAll(h, " ", "+")
	return h, segments.ValidateHash(h)
}

// writeLookup writes one lookup's response (key "" for a lookup by hash): 200, or 503 when
// the read failed (the service has logged why).
func writeLookup(w http.ResponseWriter, key string, res segments.Answer) {
	code := http.StatusOK
	if res.Err != nil {
		code = http.StatusServiceUnavailable
	}
	e := newEncoder(w, code)
	e.result(key, res)
	e.close()
}

// batchRequest is the body of POST /memberships.
type batchRequest struct {
	ContextKeys   []string
	ContextHashes []string
}

// postMemberships serves POST /memberships: many lookups, answered in request order (keys,
// then hashes), with all cache misses read in one store call. The body is read and checked
// before the request takes a lookup slot, and the slot is given back before the answer is
// written; the body's memory (see bodyBudget) once it is.
func (s *server) postMemberships() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, hold, rerr := s.decodeBatch(w, r)
		if hold != nil {
			defer hold.release()
		}
		if rerr != nil {
			rerr.write(w, r)
			return
		}
		hashes, err := s.batchHashes(req)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		release, ok := s.admit(w, r)
		if !ok {
			return
		}
		results := s.svc.LookupBatch(r.Context(), hashes)
		release()
		if refs := countRefs(results); refs > s.maxBatchRefs {
			writeError(w, http.StatusBadRequest, fmt.Sprintf(
				"the answer would hold %d segment refs, over the limit of %d: ask for fewer contexts at once", refs, s.maxBatchRefs))
			return
		}
		hold.writing(w)
		writeBatch(w, req, results)
	}
}

// writeBatch writes a batch's answer, streamed: its memory is bounded whatever its size.
func writeBatch(w http.ResponseWriter, req batchRequest, results []segments.Answer) {
	e := newEncoder(w, http.StatusOK)
	e.raw(`{"results":[`)
	for i, res := range results {
		if i > 0 {
			e.raw(",")
		}
		byHash := i >= len(req.ContextKeys)
		key := ""
		if !byHash {
			key = req.ContextKeys[i]
		}
		e.result(key, res)
		e.flushIfFull()
	}
	e.raw("]}")
	e.close()
}

// batchHashes checks a batch's keys and hashes and returns the hashes to look up, keys first.
func (s *server) batchHashes(req batchRequest) ([]string, error) {
	hashes := make([]string, 0, len(req.ContextKeys)+len(req.ContextHashes))
	for i, k := range req.ContextKeys {
		if err := s.validKey(k); err != nil {
			return nil, fmt.Errorf("contextKeys[%d]: %v", i, err)
		}
		hashes = append(hashes, segments.Hash(k))
	}
	for i, h := range req.ContextHashes {
		if err := segments.ValidateHash(h); err != nil {
			return nil, fmt.Errorf("contextHashes[%d]: %v", i, err)
		}
		hashes = append(hashes, h)
	}
	return hashes, nil
}

func countRefs(results []segments.Answer) int {
	n := 0
	for _, r := range results {
		n += r.Membership.Len()
	}
	return n
}

// requestError is a request refused before its lookups: its status code and message, and
// whether its body was left unread (then its connection is closed, not drained).
type requestError struct {
	code   int
	msg    string
	unread bool
}

func (e *requestError) write(w http.ResponseWriter, r *http.Request) {
	if !e.unread {
		writeError(w, e.code, e.msg)
		return
	}
	if e.code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	refuse(w, r, e.code, e.msg)
}

// decodeBatch reads and checks a batch request. The body must arrive within the body read
// timeout, whatever the server's own timeouts are, and get memory from the body budget: the
// hold, nil if the body was refused unread (see bodyBudget).
func (s *server) decodeBatch(w http.ResponseWriter, r *http.Request) (req batchRequest, hold *bodyHold, rerr *requestError) {
	if ce := r.Header.Values("Content-Encoding"); len(ce) > 1 || len(ce) == 1 && !strings.EqualFold(ce[0], "identity") {
		return req, nil, &requestError{http.StatusUnsupportedMediaType, "Content-Encoding must be identity: compressed bodies are not accepted", true}
	}
	ct := r.Header.Values("Content-Type")
	mt, params, err := mime.ParseMediaType(strings.Join(ct, ","))
	if cs, ok := params["charset"]; err != nil || len(ct) != 1 || mt != "application/json" || ok && !strings.EqualFold(cs, "utf-8") {
		return req, nil, &requestError{http.StatusUnsupportedMediaType, "Content-Type must be application/json (UTF-8), given once", true}
	}
	if r.ContentLength > s.maxBodyBytes { // refused before a byte of it is asked for (Expect: 100-continue)
		return req, nil, s.bodyError(&http.MaxBytesError{Limit: s.maxBodyBytes})
	}
	body, hold, err := s.bodies.read(w, r, s.maxBodyBytes, time.Now().Add(s.bodyReadTimeout), s.batchUses)
	if err != nil {
		return req, hold, s.bodyError(err)
	}
	if err := strictjson.CheckText(body); err != nil {
		return req, hold, &requestError{code: http.StatusBadRequest, msg: fmt.Sprintf("request body is not valid UTF-8 text: %v", err)}
	}
	if req, err = s.parseBatch(body); err != nil {
		return req, hold, &requestError{code: http.StatusBadRequest, msg: err.Error()}
	}
	return req, hold, nil
}

// lookupBytes is about what each lookup of a batch takes in memory while it is looked up and
// answered, beyond its key's bytes: its hash, its answer, and their share of the lookup's
// bookkeeping.
const lookupBytes = 256

// batchUses is what decoding and answering a body of n bytes may take in memory: a copy of
// each key, and lookupBytes per lookup (as many as the body could hold, within the batch
// limit: each takes at least three bytes, `"",`).
func (s *server) batchUses(n int64) int64 {
	return n + lookupBytes*min(n/3+1, int64(s.maxBatch))
}

// bodyError is the requestError of a body that could not be read.
func (s *server) bodyError(err error) *requestError {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &requestError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", s.maxBodyBytes), true}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &requestError{http.StatusRequestTimeout, fmt.Sprintf("request body did not arrive within %v", s.bodyReadTimeout), true}
	case errors.Is(err, errBodyCut):
		return &requestError{http.StatusRequestTimeout, err.Error(), true}
	case errors.Is(err, errNoBodyMemory):
		return &requestError{http.StatusTooManyRequests, err.Error(), true}
	}
	return &requestError{http.StatusBadRequest, "request body could not be read", true}
}

// parseBatch parses a batch body: one JSON object with contextKeys and/or contextHashes.
func (s *server) parseBatch(body []byte) (batchRequest, error) {
	var req batchRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	err := strictjson.Object(dec, func(name string) error {
		switch name {
		case "contextKeys":
			return decodeStrings(dec, name, &req.ContextKeys)
		case "contextHashes":
			return decodeStrings(dec, name, &req.ContextHashes)
		}
		return fmt.Errorf("unknown field %q: want contextKeys and/or contextHashes", name)
	})
	if err != nil {
		return req, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, errors.New("request body holds more than one JSON value")
	}
	if n := len(req.ContextKeys) + len(req.ContextHashes); n > s.maxBatch {
		return req, fmt.Errorf("batch of %d lookups is over the limit of %d", n, s.maxBatch)
	}
	return req, nil
}

// decodeStrings decodes the value of field, which must be an array of strings (not null:
// null leaves the slice nil, where [] makes it empty).
func decodeStrings(dec *json.Decoder, field string, dst *[]string) error {
	var typeErr *json.UnmarshalTypeError
	switch err := dec.Decode(dst); {
	case errors.As(err, &typeErr):
		return notStrings(field)
	case err != nil:
		return err
	case *dst == nil:
		return notStrings(field)
	}
	return nil
}

// notStrings is the error of a batch field that is not an array of strings.
func notStrings(field string) error { return errors.New(field + " must be an array of strings") }

// jsonError says what is wrong with a request body in the caller's terms.
func jsonError(err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New(`request body is empty: want {"contextKeys": [...]} and/or {"contextHashes": [...]}`)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("request body is truncated JSON")
	case errors.As(err, &syn):
		return fmt.Errorf("request body is not valid JSON at byte %d: %v", syn.Offset, syn)
	case errors.Is(err, strictjson.ErrNotObject):
		return errors.New(`request body must be a JSON object: {"contextKeys": [...], "contextHashes": [...]}`)
	}
	return err // unknown, repeated or mistyped fields: already in the caller's terms
}
