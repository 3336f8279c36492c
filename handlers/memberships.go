package handlers

import (
	"bytes"
	"context"
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

	"github.com/bigseg/bigseg/segments"
)

// getMembership serves GET /memberships/{contextKey}.
func (a *handler) getMembership() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, err := a.pathKey(r)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		a.writeLookup(w, r, false, key, a.svc.Lookup(r.Context(), key))
	}
}

// pathKey returns the context key of the request path. chi matches on the escaped path when
// the request had escapes that matter (RawPath set, as for "%2F"), and then hands over the
// still-escaped value; otherwise the value is already unescaped. So unescape exactly once.
func (a *handler) pathKey(r *http.Request) (string, error) {
	key := chi.URLParam(r, "contextKey")
	if r.URL.RawPath != "" {
		var err error
		if key, err = url.PathUnescape(key); err != nil {
			return "", errors.New("context key is not validly percent-encoded")
		}
	}
	return key, a.validKey(key)
}

func (a *handler) validKey(key string) error {
	switch {
	case key == "":
		return errors.New("context key is empty")
	case len(key) > a.maxKeyBytes:
		return fmt.Errorf("context key is longer than %d bytes", a.maxKeyBytes)
	case !utf8.ValidString(key):
		return errors.New("context key is not valid UTF-8")
	}
	return nil
}

// getMembershipByHash serves GET /memberships?contextHash=..., the lookup an SDK's Big
// Segment store makes, since it only ever has the hash.
func (a *handler) getMembershipByHash() http.HandlerFunc {
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
		a.writeLookup(w, r, true, "", a.svc.LookupHash(r.Context(), hash))
	}
}

// normalizeHash validates a hash from a query string. A '+' that was not escaped arrives as a
// space; a space is never part of base64, so it is taken back as the '+' the caller meant.
func normalizeHash(h string) (string, error) {
	h = strings.ReplaceAll(h, " ", "+")
	return h, segments.ValidateHash(h)
}

// writeLookup writes one lookup's response: 200, or 503 when the read failed.
func (a *handler) writeLookup(w http.ResponseWriter, r *http.Request, byHash bool, key string, res segments.Result) {
	code := http.StatusOK
	if res.Err != nil {
		code = http.StatusServiceUnavailable
		a.logReadError(r.Context(), res)
	}
	writeBody(w, code, func(b []byte) []byte { return appendResult(b, byHash, key, res) })
}

// logReadError logs a failed read by hash, never by key (keys are personal data). A read the
// caller abandoned is not the store's fault and is logged at debug only.
func (a *handler) logReadError(ctx context.Context, res segments.Result) {
	if ctx.Err() != nil {
		a.log.Debug("lookup abandoned by caller", "contextHash", res.ContextHash, "err", res.Err)
		return
	}
	a.log.Warn("membership read failed", "contextHash", res.ContextHash, "err", res.Err)
}

// batchRequest is the body of POST /memberships.
type batchRequest struct {
	ContextKeys   []string `json:"contextKeys"`
	ContextHashes []string `json:"contextHashes"`
}

// postMemberships serves POST /memberships: many lookups, answered in request order (keys,
// then hashes), with all cache misses read in one store call.
func (a *handler) postMemberships() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, code, err := a.decodeBatch(w, r)
		if err != nil {
			writeError(w, code, err.Error())
			return
		}
		queries := make([]segments.Query, 0, len(req.ContextKeys)+len(req.ContextHashes))
		for i, k := range req.ContextKeys {
			if err := a.validKey(k); err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("contextKeys[%d]: %v", i, err))
				return
			}
			queries = append(queries, segments.Query{Key: k})
		}
		for i, h := range req.ContextHashes {
			if err := segments.ValidateHash(h); err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("contextHashes[%d]: %v", i, err))
				return
			}
			queries = append(queries, segments.Query{Hash: h})
		}
		results := a.svc.LookupBatch(r.Context(), queries)
		for _, res := range results {
			if res.Err != nil {
				a.logReadError(r.Context(), res)
				break // one line per batch: the causes are the same read's
			}
		}
		writeBody(w, http.StatusOK, func(b []byte) []byte {
			b = append(b, `{"results":[`...)
			for i, res := range results {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendResult(b, queries[i].Key == "", queries[i].Key, res)
			}
			return append(b, "]}"...)
		})
	}
}

// decodeBatch reads and checks a batch request, returning the status code for its error.
func (a *handler) decodeBatch(w http.ResponseWriter, r *http.Request) (batchRequest, int, error) {
	var req batchRequest
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return req, http.StatusUnsupportedMediaType, errors.New("Content-Type must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, http.StatusRequestEntityTooLarge, fmt.Errorf("request body is larger than %d bytes", a.maxBodyBytes)
		}
		return req, http.StatusBadRequest, errors.New("request body could not be read")
	}
	if !utf8.Valid(body) {
		return req, http.StatusBadRequest, errors.New("request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, http.StatusBadRequest, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, http.StatusBadRequest, errors.New("request body holds more than one JSON value")
	}
	if n := len(req.ContextKeys) + len(req.ContextHashes); n > a.maxBatch {
		return req, http.StatusBadRequest, fmt.Errorf("batch of %d lookups is over the limit of %d", n, a.maxBatch)
	}
	return req, 0, nil
}

// jsonError says what is wrong with a request body in the caller's terms.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New(`request body is empty: want {"contextKeys": [...]} and/or {"contextHashes": [...]}`)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("request body is truncated JSON")
	case errors.As(err, &syn):
		return fmt.Errorf("request body is not valid JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errors.New(`request body must be a JSON object: {"contextKeys": [...], "contextHashes": [...]}`)
		}
		return fmt.Errorf("%s must be an array of strings", strings.SplitN(typ.Field, ".", 2)[0])
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("unknown field %s: want contextKeys and/or contextHashes", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return errors.New("request body is not a valid batch request")
	}
}
