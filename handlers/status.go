package handlers

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/bigseg/bigseg/segments"
)

// statusBody is the JSON of GET /status and of each status stream event.
type statusBody struct {
	Available          bool    `json:"available"`
	Stale              bool    `json:"stale"`
	LastSynchronizedOn int64   `json:"lastSynchronizedOn"`
	LastSynchronizedAt *string `json:"lastSynchronizedAt"`
	Cursor             *string `json:"cursor"`
	DataChangedAt      *string `json:"dataChangedAt"`
	CheckedAt          *string `json:"checkedAt"`
	StaleAfterSeconds  float64 `json:"staleAfterSeconds"`
	Store              string  `json:"store"`
	Table              string  `json:"table,omitempty"` // DynamoDB's
	Version            string  `json:"version"`
	// Environment names the environment when several are served.
	Environment string `json:"environment,omitempty"`
	// The details (see details): the prefix as stored, and while unavailable why and since when.
	Prefix      string  `json:"prefix,omitempty"`
	LastError   string  `json:"lastError,omitempty"`
	LastErrorAt *string `json:"lastErrorAt,omitempty"`
}

// statusBody is env's status; with details, also where its store keeps the data and why it
// is unavailable, which only a caller who may look its data up is told.
func (s *server) statusBody(env *segments.Environment, st segments.StoreStatus, polled, details bool) statusBody {
	b := statusBody{
		Available:         st.Available,
		Stale:             st.Stale,
		StaleAfterSeconds: s.svc.StaleAfter().Seconds(),
		Store:             s.StoreName,
		Table:             s.StoreTable,
		Version:           s.Version,
	}
	if len(s.envs) > 1 {
		b.Environment = env.Name
	}
	if view, ok := s.describe(env, ""); ok {
		b.Table = cmp.Or(view.Table, b.Table)
		if details {
			b.Prefix = view.Prefix
		}
	}
	if details && !st.Available {
		b.LastError, b.LastErrorAt = st.LastError, timeOrNil(st.LastErrorAt)
	}
	if !st.LastSynchronized.IsZero() {
		b.LastSynchronizedOn, b.LastSynchronizedAt = st.LastSynchronized.UnixMilli(), timeOrNil(st.LastSynchronized)
	}
	if st.Cursor != "" {
		b.Cursor, b.DataChangedAt = &st.Cursor, timeOrNil(st.DataChangedAt)
	}
	if polled {
		b.CheckedAt = timeOrNil(st.CheckedAt)
	}
	return b
}

// getStatus serves GET /status: the poller's last snapshot, never a store read; unscoped
// while several environments are served, every one's, by name. Open to probes; the details
// only to callers Config.Authorized says are authorized for the environment.
func (s *server) getStatus() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if chi.URLParam(r, envParam) == "" && len(s.envs) > 1 {
			all := make(map[string]statusBody, len(s.envs))
			for _, e := range s.envs {
				st, polled := e.Status()
				all[e.Name] = s.statusBody(e, st, polled, s.Authorized(r, e.Name))
			}
			writeJSON(w, http.StatusOK, struct {
				Environments map[string]statusBody `json:"environments"`
			}{all})
			return
		}
		env, ok := s.environment(w, r)
		if !ok {
			return
		}
		st, polled := env.Status()
		writeJSON(w, http.StatusOK, s.statusBody(env, st, polled, s.Authorized(r, env.Name)))
	}
}

// getStatusStream serves GET /status/stream as Server-Sent Events: the status at once, an
// event per change of available, stale or the data (a new cursor: drop cached answers), and a
// comment every heartbeat; unscoped with several environments, every one's.
func (s *server) getStatusStream() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		envs := s.envs
		if chi.URLParam(r, envParam) != "" || len(s.envs) == 1 {
			env, ok := s.environment(w, r)
			if !ok {
				return
			}
			envs = []*segments.Environment{env}
		}
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		if r.Method == http.MethodHead {
			return
		}
		rc := http.NewResponseController(w) // each write bounded, not the whole stream's
		if err := rc.SetWriteDeadline(time.Now().Add(s.StreamWriteTimeout)); err != nil {
			Error(w, r, http.StatusInternalServerError, "streaming is not supported here")
			return
		}
		ew := &eventWriter{w: w, rc: rc, s: s, last: make(map[string]said, len(envs)), open: s.stillOpen(r)}
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		if err := s.stream(r, ew, envs); err == nil || errors.Is(err, errRevoked) {
			// A stream that ends of itself gets its last chunk written, however long since
			// its last event; one whose client stopped reading does not wait again.
			rc.SetWriteDeadline(time.Now().Add(s.StreamWriteTimeout))
		}
	}
}

// stillOpen says whether the request's credentials still open what it asked for
// (Config.Authorized): a stream ends at its next write once its token is revoked.
func (s *server) stillOpen(r *http.Request) func() bool {
	env := s.scope(r)
	return func() bool { return s.Authorized(r, env) }
}

// stream sends each environment's status, again at each signal of changes, and heartbeats,
// until the client goes, the server stops, a write fails or the token is revoked (the error).
func (s *server) stream(r *http.Request, ew *eventWriter, envs []*segments.Environment) error {
	sendAll := func() error {
		for _, e := range envs {
			if err := ew.send(e); err != nil {
				return err
			}
		}
		return nil
	}
	heartbeat := time.NewTicker(s.Heartbeat)
	defer heartbeat.Stop()
	changes := s.svc.Changes() // before reading the current status: no change lost
	err := sendAll()
	for err == nil {
		select {
		case <-r.Context().Done():
			return r.Context().Err()
		case <-s.Stop:
			return nil
		case <-heartbeat.C:
			err = ew.write(": heartbeat\n\n")
		case <-changes:
			changes = s.svc.Changes()
			err = sendAll()
		}
	}
	return err
}

// errRevoked ends a stream whose token no longer opens it.
var errRevoked = errors.New("the stream's token is no longer accepted")

// eventWriter writes a status stream's events, flushing each.
type eventWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	s    *server
	last map[string]said // by environment
	open func() bool     // whether the stream's token still opens it
}

// said is what the last event said of an environment's status, of what changes are told.
type said struct {
	polled, available, stale bool
	cursor                   string
}

// send writes env's status as an event, unless it repeats the last one sent (a signal stands
// for every environment, and may tell of what the first events said).
func (ew *eventWriter) send(env *segments.Environment) error {
	st, polled := env.Status()
	now := said{polled, st.Available, st.Stale, st.Cursor}
	if l, ok := ew.last[env.Name]; ok && polled && l == now {
		return nil
	}
	ew.last[env.Name] = now
	b, _ := json.Marshal(ew.s.statusBody(env, st, polled, true)) // the token check let the stream through
	return ew.write(fmt.Sprintf("event: status\ndata: %s\n\n", b))
}

// write writes and flushes text within the stream write timeout: a client that stops reading
// loses its stream and its slot, and never holds up a shutdown for longer.
func (ew *eventWriter) write(text string) error {
	if !ew.open() {
		return errRevoked
	}
	if err := ew.rc.SetWriteDeadline(time.Now().Add(ew.s.StreamWriteTimeout)); err != nil {
		return err
	}
	if _, err := io.WriteString(ew.w, text); err != nil {
		return err
	}
	return ew.rc.Flush()
}

// getLive serves /livez and /healthz: the process serves HTTP. They never look at the store,
// so a Redis outage never gets instances restarted.
func (s *server) getLive() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

// readyBody is the JSON of /readyz.
type readyBody struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

// getReady serves /readyz: segments.Service.Readiness, with its reason when not ready.
func (s *server) getReady() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ready, reason := s.svc.Readiness(); !ready {
			writeJSON(w, http.StatusServiceUnavailable, readyBody{Reason: reason})
			return
		}
		writeJSON(w, http.StatusOK, readyBody{Ready: true})
	}
}
