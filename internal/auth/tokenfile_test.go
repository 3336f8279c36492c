package auth_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bigseg/bigseg/internal/auth"
)

// failings records what a reloader reported.
type failings struct {
	mu  sync.Mutex
	got []bool
}

func (f *failings) observe(failing bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, failing)
}

func (f *failings) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var words []string
	for _, v := range f.got {
		words = append(words, map[bool]string{true: "failing", false: "ok"}[v])
	}
	return strings.Join(words, " ")
}

func TestTokensFileErrorsAtStart(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/empty", "# nothing\n\n")
	for _, c := range []struct{ file, want string }{
		{dir + "/missing", "no such file"},
		{dir + "/empty", "no token in it"},
	} {
		if _, err := auth.NewTokens(nil, c.file, slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.file, err, c.want)
		}
	}
}

// TestTokensFileRotation rotates the file the ways operators do (rewritten in place, a
// Kubernetes Secret's symlink swapped, a file that does not load meanwhile): each takes effect
// once Run has looked, a check interval later, or at once on Reload, and a file that does not
// load keeps the last good tokens, said once.
func TestTokensFileRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		// A Kubernetes Secret volume: the file is a symlink through ..data to a directory
		// that the kubelet replaces whole.
		for _, v := range []string{"v1", "v2"} {
			os.Mkdir(filepath.Join(dir, v), 0o700)
		}
		write(t, dir+"/v1/tokens", "# callers\nold-a\nold-b\n")
		write(t, dir+"/v2/tokens", "new-a\n")
		os.Symlink("v1", dir+"/..data")
		os.Symlink("..data/tokens", dir+"/tokens")
		var logs bytes.Buffer
		var fails failings
		tok, err := auth.NewTokens(nil, dir+"/tokens", slog.New(slog.NewTextHandler(&logs, nil)), fails.observe)
		if err != nil {
			t.Fatal(err)
		}
		runInBackground(t, tok.Run)
		// tick lets a check interval pass, and Run look at the file.
		tick := func() {
			time.Sleep(auth.FileCheckInterval)
			synctest.Wait()
		}
		expect := func(step string, valid, invalid string) {
			t.Helper()
			for _, v := range strings.Fields(valid) {
				if !(tok.Scope(v) != nil) {
					t.Errorf("%s: %q refused", step, v)
				}
			}
			for _, v := range strings.Fields(invalid) {
				if tok.Scope(v) != nil {
					t.Errorf("%s: %q accepted", step, v)
				}
			}
		}
		expect("at start", "old-a old-b", "new-a")

		// The symlink swap: seen once the check interval has passed.
		os.Symlink("v2", dir+"/..data.tmp")
		os.Rename(dir+"/..data.tmp", dir+"/..data")
		expect("right after the swap", "old-a", "")
		tick()
		expect("after the swap", "new-a", "old-a old-b")

		// Rewritten in place, revoking new-a: Reload sees it at once.
		write(t, dir+"/v2/tokens", "newer\n")
		tok.Reload()
		expect("after the rewrite and Reload", "newer", "new-a")

		// A file that does not load: the last good tokens stay, said once however often looked at.
		write(t, dir+"/v2/tokens", "# emptied by mistake\n")
		for range 3 {
			tick()
			expect("while the file has no token", "newer", "")
		}
		os.Remove(dir + "/v2/tokens")
		tok.Reload()
		tok.Reload()
		expect("while the file is missing", "newer", "")
		if n := strings.Count(logs.String(), "does not load"); n != 1 {
			t.Errorf("a file that does not load was logged %d times, want once:\n%s", n, logs.String())
		}
		for range 3 {
			tick()
		}
		write(t, dir+"/v2/tokens", "fixed\n")
		tick()
		expect("once fixed", "fixed", "newer")
		// At start, the swap, the rewrite, no token (one failure), missing (another read error,
		// counted once), fixed.
		if got, want := fails.String(), "ok ok ok failing failing ok"; got != want {
			t.Errorf("observed %q, want %q", got, want)
		}
		if strings.Contains(logs.String(), "old-a") || strings.Contains(logs.String(), "newer") {
			t.Errorf("a token was logged:\n%s", logs.String())
		}
	})
}

// TestTokensNotReadByRequests: requests only use the tokens last read; without Run, a file
// rewritten is not seen however long one waits, until Reload. So no request ever reads the
// file, or waits for one that does.
func TestTokensNotReadByRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := t.TempDir() + "/tokens"
		write(t, file, "old\n")
		tok, err := auth.NewTokens(nil, file, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		session := tok.Session("old")
		write(t, file, "new\n")
		time.Sleep(10 * auth.FileCheckInterval)
		if !(tok.Scope("old") != nil) || (tok.Scope("new") != nil) || session.Scope() == nil {
			t.Error("a request, or a session, read the file")
		}
		tok.Reload()
		if (tok.Scope("old") != nil) || !(tok.Scope("new") != nil) || session.Scope() != nil {
			t.Error("Reload did not take the file's tokens")
		}
	})
}

// TestTokensFileRemovedAndPutBack: a file removed then put back unchanged is in force again,
// so the failure it was reported as is over, and a second removal is a new failure, logged
// again. A file that did not load, put back as it was, still does not.
func TestTokensFileRemovedAndPutBack(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/tokens", "tok-a\n")
	var logs bytes.Buffer
	var fails failings
	tok, err := auth.NewTokens(nil, dir+"/tokens", slog.New(slog.NewTextHandler(&logs, nil)), fails.observe)
	if err != nil {
		t.Fatal(err)
	}
	move := func(from, to string) {
		t.Helper()
		if err := os.Rename(dir+"/"+from, dir+"/"+to); err != nil {
			t.Fatal(err)
		}
		tok.Reload()
	}
	for range 2 {
		move("tokens", "aside")
		move("aside", "tokens")
	}
	if tok.Scope("tok-a") == nil {
		t.Error("tok-a refused")
	}
	if got, want := fails.String(), "ok failing ok failing ok"; got != want {
		t.Errorf("removed and put back twice: observed %q, want %q", got, want)
	}
	if n := strings.Count(logs.String(), "does not load"); n != 2 {
		t.Errorf("two removals logged %d times, want twice:\n%s", n, logs.String())
	}

	write(t, dir+"/tokens", "# no token\n")
	tok.Reload()
	move("tokens", "aside")
	move("aside", "tokens")
	if got, want := fails.String(), "ok failing ok failing ok failing failing"; got != want {
		t.Errorf("a bad file removed and put back: observed %q, want %q (still failing)", got, want)
	}
}
