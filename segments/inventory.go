package segments

import (
	"context"
	"time"
)

// Scanner is a store that can list every context it holds, for the inventory: the counts of
// contexts per segment that an operator compares with what LaunchDarkly shows.
type Scanner interface {
	// Scan calls each once for every context stored (its hash and both its sets), a page of
	// reads at a time, holding no connection while each runs; it stops at each's first error.
	Scan(ctx context.Context, each func(hash string, m Membership) error) error
}

// Scan states.
const (
	ScanNone     = "none"     // no scan has finished yet
	ScanRunning  = "running"  // a scan is under way; the counts are the last complete scan's
	ScanComplete = "complete" // the counts are the last scan's, which finished
)

// Inventory is the last complete scan of an environment's store, and the state of the next.
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
	if e.inventory.State == "" {
		return Inventory{State: ScanNone}
	}
	return e.inventory
}

// SetInventory records the environment's inventory, as the scan loop finds it.
func (e *Environment) SetInventory(inv Inventory) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inventory = inv
}

// Describer is a store that can say where it keeps a context's data, for explain and /status:
// an operator compares it with what the synchronizer wrote.
type Describer interface {
	// Describe names the store and the exact keys (or items) a read of hash reads; with hash
	// "", Keys is empty.
	Describe(hash string) StoreView
}

// StoreView is a store as Describe names it. It holds no password, token or secret.
type StoreView struct {
	Kind   string   // "redis", "dynamodb" or "embedded"
	Prefix string   // the key prefix as stored ("" for none)
	Table  string   // DynamoDB's table, "" elsewhere
	Keys   []string // Redis keys, or DynamoDB items as "namespace/key"
}

// Explanation is a read of one context straight from the store, beside what the cache holds.
type Explanation struct {
	Answer Answer      // the lookup's answer from this read (never from the cache)
	Cached *Membership // the membership the cache holds for the hash, nil if none
	Status StoreStatus // the environment's last polled status
}

// Explain reads hash from the store, bypassing the cache (and not filling it), bounded as a
// lookup: within the lookup timeout, holding a read slot.
func (e *Environment) Explain(ctx context.Context, hash string) Explanation {
	ctx, cancel := e.svc.withTimeout(ctx)
	defer cancel()
	st, _ := e.firstStatus(ctx)
	x := Explanation{Status: *st, Answer: Answer{ContextHash: hash, Status: st.LookupStatus()}}
	if _, _, m, hit := e.get(hash); hit {
		x.Cached = &m
	}
	if r := e.readStore(ctx, []string{hash}, e.slots)[0]; r.Err != nil {
		x.Answer.Status, x.Answer.Err = StoreError, r.Err
	} else {
		x.Answer.Membership = r.Membership
	}
	return x
}
