package handlers

import (
	"fmt"
	"net/http"
	"time"

	"github.com/bigseg/bigseg/segments"
)

// DefaultHeartbeat is how often an idle status stream sends a comment, so that proxies and
// load balancers keep it open.
const DefaultHeartbeat = 15 * time.Second

// statusBody is the JSON of GET /status and of each status stream event.
type statusBody struct {
	Available          bool    `json:"available"`
	Stale              bool    `json:"stale"`
	LastSynchronizedOn int64   `json:"lastSynchronizedOn"`
	LastSynchronizedAt *string `json:"lastSynchronizedAt"`
	CheckedAt          *string `json:"checkedAt"`
	StaleAfterSeconds  float64 `json:"staleAfterSeconds"`
	Store              string  `json:"store"`
}

func (a *handler) statusBody(st segments.StoreStatus, polled bool) statusBody {
	b := statusBody{
		Available:         st.Available,
		Stale:             st.Stale,
		StaleAfterSeconds: a.svc.StaleAfter().Seconds(),
		Store:             a.storeName,
	}
	if !st.LastSynchronized.IsZero() {
		b.LastSynchronizedOn = st.LastSynchronized.UnixMilli()
		at := st.LastSynchronized.UTC().Format(time.RFC3339Nano)
		b.LastSynchronizedAt = &at
	}
	if polled {
		at := st.CheckedAt.UTC().Format(time.RFC3339Nano)
		b.CheckedAt = &at
	}
	return b
}

// getStatus serves GET /status: the poller's last snapshot, never a store read.
func (a *handler) getStatus() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, polled := a.svc.Status()
		writeJSON(w, http.StatusOK, a.statusBody(st, polled))
	}
}

// getStatusStream serves GET /status/stream as Server-Sent Events: the current status at once,
// then one event per change of available or stale, and a comment every heartbeat. It ends
// when the client goes or the server stops (WithStop). At most WithMaxStreams are open at once.
func (a *handler) getStatusStream() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if r.Method == http.MethodHead {
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			return
		}
		release, ok := a.openStream(w)
		if !ok {
			return
		}
		defer release()
		rc := http.NewResponseController(w)
		// The server's write timeout is for ordinary responses; a stream lives on.
		if err := rc.SetWriteDeadline(time.Time{}); err != nil {
			writeError(w, http.StatusInternalServerError, "streaming is not supported here")
			return
		}
		changes, cancel := a.svc.Subscribe() // before reading the current status: no change lost
		defer cancel()

		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)

		// A poll that completes between Subscribe and Status is both in the first event and on
		// the channel: send a change only if it differs from what the client last got.
		var last segments.StoreStatus
		lastPolled := false
		send := func(st segments.StoreStatus, polled bool) error {
			if lastPolled && polled && st.Available == last.Available && st.Stale == last.Stale {
				return nil
			}
			last, lastPolled = st, polled
			b, _ := jsonMarshal(a.statusBody(st, polled))
			if _, err := fmt.Fprintf(w, "event: status\ndata: %s\n\n", b); err != nil {
				return err
			}
			return rc.Flush()
		}
		st, polled := a.svc.Status()
		if send(st, polled) != nil {
			return
		}
		heartbeat := time.NewTicker(a.heartbeat)
		defer heartbeat.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-a.stop:
				return
			case st := <-changes:
				if send(st, true) != nil {
					return
				}
			case <-heartbeat.C:
				if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil || rc.Flush() != nil {
					return
				}
			}
		}
	}
}

// getLive serves /livez and /healthz: the process serves HTTP. They never look at the store,
// so a Redis outage never gets instances restarted.
func (a *handler) getLive() http.HandlerFunc {
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
func (a *handler) getReady() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ready, reason := a.svc.Readiness(); !ready {
			writeJSON(w, http.StatusServiceUnavailable, readyBody{Reason: reason})
			return
		}
		writeJSON(w, http.StatusOK, readyBody{Ready: true})
	}
}
