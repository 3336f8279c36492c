package storetest

import (
	"context"
	"testing"
	"time"
)

// Leaser is a store's scan lease, as the inventory takes and releases it.
type Leaser interface {
	TakeLease(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, owner string) error
}

// RunReleaseLease checks, on a and b (two replicas' handles on one store's lease, held by
// no one), that ReleaseLease gives the lease back if its owner asks, so that another replica
// takes it at once, and leaves another owner's alone; with no lease it does nothing.
func RunReleaseLease(t *testing.T, a, b Leaser) {
	t.Helper()
	ctx := context.Background()
	take := func(l Leaser, owner string) bool {
		t.Helper()
		ok, err := l.TakeLease(ctx, owner, time.Hour)
		if err != nil {
			t.Fatalf("TakeLease(%s): %v", owner, err)
		}
		return ok
	}
	if err := a.ReleaseLease(ctx, "a"); err != nil {
		t.Fatalf("ReleaseLease with no lease: %v", err)
	}
	if !take(a, "a") {
		t.Fatal("a could not take a free lease")
	}
	if err := b.ReleaseLease(ctx, "b"); err != nil {
		t.Fatalf("b's ReleaseLease of a's lease: %v", err)
	}
	if take(b, "b") {
		t.Fatal("b's release gave it a's lease")
	}
	if err := a.ReleaseLease(ctx, "a"); err != nil {
		t.Fatalf("a's ReleaseLease: %v", err)
	}
	if !take(b, "b") {
		t.Error("b could not take the lease a gave back")
	}
}
