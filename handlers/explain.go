package handlers

import (
	"context"
	"net/http"

	"github.com/bigseg/bigseg/segments"
)

// getExplain serves GET /memberships/{contextKey}/explain: where the store keeps the context's
// data, what a read straight from it finds, and what the cache holds. Its key is taken as a
// lookup's is, with the same 400s.
func (s *server) getExplain() http.HandlerFunc {
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
		s.writeExplain(r.Context(), w, env, key, segments.Hash(key))
	}
}

// getExplainByHash serves GET /explain?contextHash=...: the same, for a caller that has only
// the hash, as GET /memberships?contextHash= is. (Not /memberships/explain, which is the
// lookup of the context key "explain".)
func (s *server) getExplainByHash() http.HandlerFunc {
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
		s.writeExplain(r.Context(), w, env, "", hash)
	}
}

// storeBody is the "store" of an explanation; what Describe names, which holds no secret.
type storeBody struct {
	Kind   string  `json:"kind"`
	Prefix *string `json:"prefix,omitempty"` // nil: the store cannot say
	Table  string  `json:"table,omitempty"`
}

// Describer is a store that can say where it keeps a context's data, for explain: an operator
// compares it with what the synchronizer wrote.
type Describer interface {
	// Describe names the store and the exact keys (or items) a read of hash reads; with hash
	// "", Keys is empty.
	Describe(hash string) segments.StoreView
}

// describe is the store of env as it names itself (false: it cannot, and only the kind and
// table configured are known).
func (s *server) describe(env *segments.Environment, hash string) (segments.StoreView, bool) {
	if d, ok := env.Store.(Describer); ok {
		return d.Describe(hash), true
	}
	return segments.StoreView{Kind: s.StoreName, Table: s.StoreTable}, false
}

// writeExplain writes an explanation of hash (key "" for one by hash) with 200, whatever the
// read found: a failed read is told in status and error, as a lookup tells it. Streamed, as a
// lookup is: refs are written twice (read and memberships), within the encoder's buffer.
func (s *server) writeExplain(ctx context.Context, w http.ResponseWriter, env *segments.Environment, key, hash string) {
	x := env.Explain(ctx, hash)
	view, described := s.describe(env, hash)
	e := newEncoder(w, http.StatusOK)
	e.raw("{")
	if key != "" {
		e.b = append(appendString(append(e.b, `"contextKey":`...), key), ',')
	}
	e.b = appendString(append(e.b, `"contextHash":`...), hash)
	e.b = appendString(append(e.b, `,"environment":`...), env.Name)
	sv := storeBody{Kind: view.Kind, Table: view.Table}
	if described {
		sv.Prefix = &view.Prefix
	}
	e.raw(`,"store":`)
	e.value(sv)
	e.explainRead(x.Answer, view.Keys, described)
	e.raw(`,"status":"` + string(x.Answer.Status) + `"`)
	if x.Answer.Err != nil {
		e.b = appendString(append(e.b, `,"error":`...), explainError(x.Answer.Err))
	}
	e.explainRest(x)
	e.close()
}

// explainRead appends what the read found: the keys read (if the store names them), both
// sets as stored and the memberships as a lookup answers them; only the keys if it failed.
func (e *encoder) explainRead(a segments.Answer, keys []string, described bool) {
	e.raw(`,"read":{`)
	sep := ""
	if described {
		e.raw(`"keys":`)
		e.list(keys)
		sep = ","
	}
	if a.Err == nil {
		e.raw(sep + `"included":`)
		e.refs(a.Membership, true)
		e.raw(`,"excluded":`)
		e.refs(a.Membership, false)
	}
	e.raw("}")
	if a.Err == nil {
		e.raw(`,"memberships":`)
		e.memberships(a.Membership)
	}
}

// metadataView is the "metadata" of an explanation: the last poll's, which the status is of.
type metadataView struct {
	SynchronizedOn int64  `json:"synchronizedOn,omitempty"` // Unix milliseconds
	Cursor         string `json:"cursor,omitempty"`
}

// cacheView is the "cache" of an explanation: whether the cache holds the context, and whether
// what it holds is what the store answered just now.
type cacheView struct {
	Holds  bool `json:"holds"`
	Agrees bool `json:"agrees"`
}

// explainRest appends the metadata and the cache, and ends the object.
func (e *encoder) explainRest(x segments.Explanation) {
	md := metadataView{Cursor: x.Status.Cursor}
	if !x.Status.LastSynchronized.IsZero() {
		md.SynchronizedOn = x.Status.LastSynchronized.UnixMilli()
	}
	e.raw(`,"metadata":`)
	e.value(md)
	held := x.Cached != nil
	e.raw(`,"cache":`)
	e.value(cacheView{Holds: held, Agrees: held && x.Answer.Err == nil && *x.Cached == x.Answer.Membership})
	e.raw("}")
}

// explainError is what an explanation says of a failed read: its error, as /status says the
// poll's (the stores' errors quote no password: storage/redis redacts its URLs).
func explainError(err error) string { return err.Error() }
