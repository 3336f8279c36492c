package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

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
	Version            string  `json:"version"`
}

func (s *server) statusBody(st segments.StoreStatus, polled bool) statusBody {
	b := statusBody{
		Available:         st.Available,
		Stale:             st.Stale,
		StaleAfterSeconds: s.svc.StaleAfter().Seconds(),
		Store:             s.StoreName,
		Version:           s.Version,
	}
	if !st.LastSynchronized.IsZero() {
		b.LastSynchronizedOn = st.LastSynchronized.UnixMilli()
		at := st.LastSynchronized.UTC().Format(time.RFC3339Nano)
		b.LastSynchronizedAt = &at
	}
	if st.Cursor != "" {
		cursor, at := st.Cursor, st.DataChangedAt.UTC().Format(time.RFC3339Nano)
		b.Cursor, b.DataChangedAt = &cursor, &at
	}
	if polled {
		at := st.CheckedAt.UTC().Format(time.RFC3339Nano)
		b.CheckedAt = &at
	}
	return b
}

// getStatus serves GET /status: the poller's last snapshot, never a store read.
func (s *server) getStatus() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, polled := s.svc.Status()
		writeJSON(w, http.StatusOK, s.statusBody(st, polled))
	}
}

// getStatusStream serves GET /status/stream as Server-Sent Events: the current status at once,
// then one event per change of available or stale and per change of the data (a new cursor:
// a client that caches answers drops them), and a comment every heartbeat. It ends
// when the client goes or the server stops (Config.Stop). Config.Streams bounds how many are
// open at once.
func (s *server) getStatusStream() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		if r.Method == http.MethodHead {
			return
		}
		rc := http.NewResponseController(w)
		// The server's write timeout is for ordinary responses; a stream lives on, each of its
		// writes bounded by the stream write timeout.
		if err := rc.SetWriteDeadline(time.Now().Add(s.StreamWriteTimeout)); err != nil {
			Error(w, r, http.StatusInternalServerError, "streaming is not supported here")
			return
		}
		changes, cancel := s.svc.Subscribe() // before reading the current status: no change lost
		defer cancel()
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		s.stream(r.Context(), &eventWriter{w: w, rc: rc, s: s}, changes)
	}
}

// stream sends the current status, then each change and a heartbeat comment, until the client
// goes, the server stops or a write fails.
func (s *server) stream(ctx context.Context, ew *eventWriter, changes <-chan segments.StoreStatus) {
	st, polled := s.svc.Status()
	if ew.send(st, polled) != nil {
		return
	}
	heartbeat := time.NewTicker(s.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Stop:
			return
		case st := <-changes:
			if ew.send(st, true) != nil {
				return
			}
		case <-heartbeat.C:
			if ew.comment("heartbeat") != nil {
				return
			}
		}
	}
}

// eventWriter writes a status stream's events, flushing each.
type eventWriter struct {
	w          http.ResponseWriter
	rc         *http.ResponseController
	s          *server
	last       segments.StoreStatus
	lastPolled bool
}

// send writes st as an event, unless it repeats the last one sent: a poll that completes
// between Subscribe and the first Status is both in the first event and on the channel.
func (ew *eventWriter) send(st segments.StoreStatus, polled bool) error {
	if ew.lastPolled && polled && st.Available == ew.last.Available && st.Stale == ew.last.Stale && st.Cursor == ew.last.Cursor {
		return nil
	}
	ew.last, ew.lastPolled = st, polled
	b, _ := json.Marshal(ew.s.statusBody(st, polled))
	return ew.write(fmt.Sprintf("event: status\ndata: %s\n\n", b))
}

func (ew *eventWriter) comment(text string) error {
	return ew.write(": " + text + "\n\n")
}

// write writes and flushes text within the stream write timeout: a client that stops reading
// loses its stream, and its slot, then, and never holds up a shutdown for longer.
func (ew *eventWriter) write(text string) error {
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

// getReady serves /readyz: the service's readiness (see segments.Service.Readiness).
func (s *server) getReady() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ready, reason := s.svc.Readiness(); !ready {
			writeJSON(w, http.StatusServiceUnavailable, readyBody{Reason: reason})
			return
		}
		writeJSON(w, http.StatusOK, readyBody{Ready: true})
	}
}
