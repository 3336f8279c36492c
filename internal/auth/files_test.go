package auth_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/internal/auth"
)

// runInBackground runs a reload loop (Tokens.Run, Certificates.Run) as a server does, until the
// test ends, and checks that it stops when its context ends.
func runInBackground(t *testing.T, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the reload loop: %v", err)
		}
	})
}

// TestRunWithNothingToWatch: without a tokens file, or without TLS (a nil *Certificates, as
// cmd/server holds then), Run returns at once, and Reload does nothing.
func TestRunWithNothingToWatch(t *testing.T) {
	tok, _ := auth.NewTokens([]string{"listed"}, "", slog.New(slog.DiscardHandler), nil)
	var certs *auth.Certificates
	var none *auth.Tokens
	for name, run := range map[string]func(context.Context) error{"a token list": tok.Run, "no TLS": certs.Run, "nil tokens": none.Run} {
		if err := run(context.Background()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	tok.Reload()
	certs.Reload()
	none.Reload()
	if tok.Scope("listed") == nil {
		t.Error("Reload lost a listed token")
	}
}

// TestReadSettingFileBound: a setting naming a file far too large for one (a log, /dev/zero)
// is an error, not memory spent.
func TestReadSettingFileBound(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/ok", "tok\n")
	if b, err := auth.ReadSettingFile(dir + "/ok"); err != nil || string(b) != "tok\n" {
		t.Errorf("a small file: %q, %v", b, err)
	}
	write(t, dir+"/big", strings.Repeat("x", auth.MaxSettingFileBytes+1))
	if _, err := auth.ReadSettingFile(dir + "/big"); err == nil || !strings.Contains(err.Error(), "not a setting file") {
		t.Errorf("a file of more than MaxSettingFileBytes: %v", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := auth.ReadSettingFile("/dev/zero"); err == nil {
			t.Error("/dev/zero read as a setting file")
		}
	}
}
