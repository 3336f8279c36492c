package handlers

import (
	"testing"

	"go.uber.org/goleak"
)

// Status streams and the lookups behind handlers start goroutines: none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
