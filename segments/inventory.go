package segments

import "time"

// Scan states.
const (
	ScanNone     = "none"     // no scan has finished yet
	ScanRunning  = "running"  // a scan is under way; the counts are the last complete scan's
	ScanComplete = "complete" // the counts are the last scan's, which finished
)

// Inventory counts the contexts of each segment in an environment's store, as its last complete
// scan found them, for an operator to compare with what LaunchDarkly shows; and the state of
// the next scan.
type Inventory struct {
	State    string         // ScanNone, ScanRunning or ScanComplete
	Contexts int64          // distinct contexts stored
	Segments []SegmentCount // every ref found, most contexts first
	// StartedAt and FinishedAt bound the counted scan; Cursor* are the store's cursors then.
	StartedAt, FinishedAt     time.Time
	CursorStart, CursorFinish string
	LastError                 string    // why the last scan failed, "" if it did not
	LastErrorAt               time.Time // when
}

// SegmentCount is one ref's contexts: those that include it and those that only exclude it
// (a context in both sets is included, as a lookup answers).
type SegmentCount struct {
	Ref                string
	Included, Excluded int64
}

// Inventory returns the environment's last inventory (State ScanNone before any).
func (e *Environment) Inventory() Inventory {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.inventory
}

// SetInventory records the environment's inventory, as the scan loop finds it.
func (e *Environment) SetInventory(inv Inventory) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inventory = inv
}
