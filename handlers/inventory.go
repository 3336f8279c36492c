package handlers

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/bigseg/bigseg/segments"
)

// getSegments serves GET /segments: the environment's inventory, the counts of its last
// complete scan, which the poller's scan keeps; never a store read.
func (s *server) getSegments() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		env, ok := s.environment(w, r)
		if !ok {
			return
		}
		writeInventory(w, env.Name, env.Inventory())
	}
}

// scanBody is the "scan" of GET /segments: when the counted scan ran, and why the last failed.
type scanBody struct {
	State         string  `json:"state"`
	StartedAt     *string `json:"startedAt,omitempty"`
	FinishedAt    *string `json:"finishedAt,omitempty"`
	CursorAtStart string  `json:"cursorAtStart,omitempty"`
	CursorAtEnd   string  `json:"cursorAtEnd,omitempty"`
	LastError     string  `json:"lastError,omitempty"`
	LastErrorAt   *string `json:"lastErrorAt,omitempty"`
}

// writeInventory writes an inventory, streamed: an environment may hold 10,000 refs and more,
// and the answer takes no more memory than the encoder's buffer (flushSize) whatever their number.
func writeInventory(w http.ResponseWriter, env string, inv segments.Inventory) {
	e := newEncoder(w, http.StatusOK)
	e.b = appendString(append(e.b, `{"environment":`...), env)
	e.b = strconv.AppendInt(append(e.b, `,"contexts":`...), inv.Contexts, 10)
	e.raw(`,"segments":[`)
	for i, c := range inv.Segments {
		if i > 0 {
			e.raw(",")
		}
		e.b = appendString(append(e.b, `{"ref":`...), c.Ref)
		e.b = strconv.AppendInt(append(e.b, `,"included":`...), c.Included, 10)
		e.b = strconv.AppendInt(append(e.b, `,"excluded":`...), c.Excluded, 10)
		e.raw("}")
		e.flushIfFull()
	}
	e.raw(`],"scan":`)
	e.value(scanBody{
		State: inv.State, StartedAt: timeOrNil(inv.StartedAt), FinishedAt: timeOrNil(inv.FinishedAt),
		CursorAtStart: inv.CursorStart, CursorAtEnd: inv.CursorFinish,
		LastError: inv.LastError, LastErrorAt: timeOrNil(inv.LastErrorAt),
	})
	e.raw("}")
	e.close()
}

// WriteInventories writes invs, of the environments named, as GET /segments answers each: one
// object, or an array of them for several (server inventory --json).
func WriteInventories(w io.Writer, names []string, invs []segments.Inventory) error {
	many := len(invs) != 1
	if many {
		_, _ = io.WriteString(w, "[")
	}
	for i, inv := range invs {
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		writeInventory(plainWriter{w, http.Header{}}, names[i], inv)
	}
	if many {
		_, err := io.WriteString(w, "]\n")
		return err
	}
	return nil
}

// plainWriter is an http.ResponseWriter over a plain io.Writer: an answer without its headers.
type plainWriter struct {
	io.Writer
	h http.Header
}

func (p plainWriter) Header() http.Header { return p.h }
func (plainWriter) WriteHeader(int)       {}

// timeOrNil is t in RFC 3339 (UTC, as precise as it is), nil for the zero time: a JSON null,
// or a field left out.
func timeOrNil(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}
