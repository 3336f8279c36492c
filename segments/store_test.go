package segments

import (
	"testing"
	"time"
)

// The bound is the last millisecond that RFC 3339 can write.
func TestMaxSynchronizedOn(t *testing.T) {
	got, want := time.UnixMilli(MaxSynchronizedOnMillis).UTC(), time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
	if !got.Equal(want) {
		t.Errorf("%v, want %v", got, want)
	}
	if next := got.Add(time.Millisecond); next.Year() != 10000 {
		t.Errorf("a millisecond later is %v, still before year 10000", next)
	}
}
