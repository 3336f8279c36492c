package memory

import (
	"context"
	"fmt"

	"github.com/bigseg/bigseg/segments"
)

// scanPage is how many contexts a scan emits between two checks of its context.
const scanPage = 100

// Scan is the inventory's scan over the snapshot held when it starts (a Replace meanwhile
// is seen by the next scan), in no particular order: every context with refs, once. It holds
// nothing that reads or Replace wait for, and gives up when ctx ends, between two pages. It
// walks no store, so it never calls walked.
func (s *Store) Scan(ctx context.Context, _ func(skipped int) error, each func(hash string, m segments.Membership) error) error {
	n := 0
	for h, m := range s.snap.Load().memberships {
		if n++; n%scanPage == 1 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("scan: %w", err)
			}
		}
		if m == (segments.Membership{}) {
			continue // an entry without refs: nothing stored, as Redis stores no empty set
		}
		if err := each(h, m); err != nil {
			return err
		}
	}
	return nil
}

// Describe is how explain and /status name the store: the embedded store has no prefix and no keys.
func (s *Store) Describe(string) segments.StoreView { return segments.StoreView{Kind: "embedded"} }
