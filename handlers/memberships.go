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
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/bigseg/bigseg/internal/strictjson"
	"github.com/bigseg/bigseg/segments"
)

// getMembership serves GET /memberships/{contextKey}.
func (s *server) getMembership() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		env, ok := s.environment(w, r)
		if !ok {
			return
		}
		key, err := s.pathKey(r)
		if err != nil {
			Error(w, r, http.StatusBadRequest, err.Error())
			return
		}
		writeLookup(w, key, env.LookupHash(r.Context(), segments.Hash(key)))
	}
}

// pathKey returns the context key of the path, unescaped exactly once: chi hands over the
// escaped value when the path had escapes that matter (RawPath set, as for "%2F").
func (s *server) pathKey(r *http.Request) (string, error) {
	if r.URL.RawQuery != "" && r.URL.Query().Has("contextHash") { // which would be looked up?
		return "", errors.New("give the context key in the path or contextHash, not both")
	}
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
	case len(key) > s.MaxKeyBytes:
		return fmt.Errorf("context key is longer than %d bytes", s.MaxKeyBytes)
	case !utf8.ValidString(key):
		return errors.New("context key is not valid UTF-8")
	}
	return nil
}

// getMembershipByHash serves GET /memberships?contextHash=..., the lookup an SDK's Big
// Segment store makes, since it only ever has the hash.
func (s *server) getMembershipByHash() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		env, ok := s.environment(w, r)
		if !ok {
			return
		}
		hash, err := queryHash(r.URL.RawQuery)
		if err != nil {
			Error(w, r, http.StatusBadRequest, err.Error())
			return
		}
		writeLookup(w, "", env.LookupHash(r.Context(), hash))
	}
}

// queryHash is the query's one contextHash, validated. A '+' that was not escaped arrives as
// a space, never part of base64: it is taken back as the '+' the caller meant.
func queryHash(rawQuery string) (string, error) {
	q, err := url.ParseQuery(rawQuery)
	hashes, given := q["contextHash"]
	switch {
	case err != nil:
		return "", errors.New("query string is not validly encoded")
	case !given:
		return "", errors.New("contextHash query parameter is required (or use /memberships/{contextKey})")
	case len(hashes) != 1:
		return "", errors.New("give contextHash once; POST /memberships looks up many")
	}
	h := strings.ReplaceAll(hashes[0], " ", "+")
	return h, segments.ValidateHash(h)
}

// writeLookup writes one lookup's answer (key "" by hash): 200, or 503 if the read failed.
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
// then hashes); its body is read (Config.Batches) before it runs.
func (s *server) postMemberships() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		env, ok := s.environment(w, r)
		if !ok {
			return
		}
		req, hashes, err := s.decodeBatch(r)
		if err != nil {
			Error(w, r, http.StatusBadRequest, err.Error())
			return
		}
		results := env.LookupBatch(r.Context(), hashes)
		if refs := countRefs(results); refs > s.MaxBatchRefs {
			Error(w, r, http.StatusBadRequest, fmt.Sprintf(
				"the answer would hold %d segment refs, over the limit of %d: ask for fewer contexts at once", refs, s.MaxBatchRefs))
			return
		}
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
		key := "" // by hash
		if i < len(req.ContextKeys) {
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

// jsonBody refuses, unread, a batch body that is not uncompressed JSON.
func (s *server) jsonBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ce := r.Header.Values("Content-Encoding"); len(ce) > 1 || len(ce) == 1 && !strings.EqualFold(ce[0], "identity") {
			Error(w, r, http.StatusUnsupportedMediaType, "Content-Encoding must be identity: compressed bodies are not accepted")
			return
		}
		ct := r.Header.Values("Content-Type")
		mt, params, err := mime.ParseMediaType(strings.Join(ct, ","))
		if cs, ok := params["charset"]; err != nil || len(ct) != 1 || mt != "application/json" || ok && !strings.EqualFold(cs, "utf-8") {
			Error(w, r, http.StatusUnsupportedMediaType, "Content-Type must be application/json (UTF-8), given once")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// decodeBatch checks and parses a batch body, read whole by Config.Batches (else here), and
// returns it with the hashes to look up.
func (s *server) decodeBatch(r *http.Request) (batchRequest, []string, error) {
	body, err := s.batchBody(r)
	if err != nil {
		return batchRequest{}, nil, errors.New("request body could not be read")
	}
	if err := strictjson.CheckText(body); err != nil {
		return batchRequest{}, nil, fmt.Errorf("request body is not valid UTF-8 text: %v", err)
	}
	req, err := s.parseBatch(body)
	if err != nil {
		return req, nil, err
	}
	hashes, err := s.batchHashes(req)
	return req, hashes, err
}

// batchBody is the batch body that Config.Batches read whole (a Bytes method); else it is read
// here, whole, up to MaxBodyBytes, with no memory budget.
func (s *server) batchBody(r *http.Request) ([]byte, error) {
	if b, ok := r.Body.(interface{ Bytes() []byte }); ok {
		return b.Bytes(), nil
	}
	return io.ReadAll(http.MaxBytesReader(nil, r.Body, s.MaxBodyBytes))
}

// lookupBytes is about what each lookup of a batch takes in memory beyond its key: its hash,
// its answer and their share of the bookkeeping.
const lookupBytes = 256

// BatchUses returns what decoding and answering a batch body of n bytes may take in memory,
// for a body budget (limit.Bodies) to hold while the batch is answered: a copy of each key,
// and lookupBytes per lookup it could hold (each takes at least 3 bytes, `"",`), at most
// maxBatch (Config.MaxBatch; DefaultMaxBatch if 0 or less).
func BatchUses(maxBatch int) func(n int64) int64 {
	orDefault(&maxBatch, DefaultMaxBatch)
	return func(n int64) int64 { return n + lookupBytes*min(n/3+1, int64(maxBatch)) }
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
	if n := len(req.ContextKeys) + len(req.ContextHashes); n > s.MaxBatch {
		return req, fmt.Errorf("batch of %d lookups is over the limit of %d", n, s.MaxBatch)
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
