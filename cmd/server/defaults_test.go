package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/resp"
)

// The configuration's defaults of the listeners' settings are the packages' own: defaultConfig
// holds them as plain values.
func TestDefaultsAreThePackages(t *testing.T) {
	got, want := defaultConfig(), defaultConfig()
	want.MaxKeyBytes, want.MaxBatch, want.MaxBatchRefs = handlers.DefaultMaxKeyBytes, handlers.DefaultMaxBatch, handlers.DefaultMaxBatchRefs
	want.MaxBodyBytes, want.BodyReadTimeout = handlers.DefaultMaxBodyBytes, handlers.DefaultBodyReadTimeout
	want.RESPReadTimeout = resp.DefaultReadTimeout
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaultConfig differs from the packages' defaults (-packages +config):\n%s", diff)
	}
}
