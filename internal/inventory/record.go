package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/bigseg/bigseg/segments"
)

// record is an inventory as JSON as the lease holder stores it for the other replicas.
type record struct {
	Environment  string          `json:"environment"`
	State        string          `json:"state"`
	Contexts     int64           `json:"contexts"`
	Segments     []segmentRecord `json:"segments"`
	StartedAt    time.Time       `json:"startedAt"`
	FinishedAt   time.Time       `json:"finishedAt"`
	CursorStart  string          `json:"cursorStart"`
	CursorFinish string          `json:"cursorFinish"`
	Shrunk       int             `json:"shrunk,omitempty"` // segments that lost over half their contexts since the scan before
}

type segmentRecord struct {
	Ref      string `json:"ref"`
	Included int64  `json:"included"`
	Excluded int64  `json:"excluded"`
}

func toRecord(env string, inv segments.Inventory, shrunk int) record {
	r := record{Environment: env, State: inv.State, Contexts: inv.Contexts, Segments: make([]segmentRecord, len(inv.Segments)),
		StartedAt: inv.StartedAt, FinishedAt: inv.FinishedAt, CursorStart: inv.CursorStart, CursorFinish: inv.CursorFinish, Shrunk: shrunk}
	for i, s := range inv.Segments {
		r.Segments[i] = segmentRecord(s)
	}
	return r
}

// encode is the JSON of a complete inventory, as stored.
func encode(env string, inv segments.Inventory, shrunk int) []byte {
	b, err := json.Marshal(toRecord(env, inv, shrunk))
	if err != nil {
		panic(err) // strings, numbers and times only
	}
	return b
}

var errNotInventory = errors.New("not an inventory as bigseg stores it")

// decode reads what encode stored: a complete inventory (and its shrunk count), or an error
// for anything else, which the store holds as a failed read.
func decode(data []byte) (segments.Inventory, int, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return segments.Inventory{}, 0, fmt.Errorf("%w: %w", errNotInventory, err)
	}
	if r.State != segments.ScanComplete || r.FinishedAt.IsZero() || r.Contexts < 0 || r.Shrunk < 0 {
		return segments.Inventory{}, 0, errNotInventory
	}
	inv := segments.Inventory{State: r.State, Contexts: r.Contexts, Segments: make([]segments.SegmentCount, len(r.Segments)),
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, CursorStart: r.CursorStart, CursorFinish: r.CursorFinish}
	for i, s := range r.Segments {
		if s.Included < 0 || s.Excluded < 0 {
			return segments.Inventory{}, 0, errNotInventory
		}
		inv.Segments[i] = segments.SegmentCount(s)
	}
	return inv, r.Shrunk, nil
}
