package guard

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Tokens is the set of bearer tokens a server accepts: a fixed list, or the lines of a file
// (# comments and blank lines ignored) that is read again when it changes, so that a token is
// rotated or revoked without a restart. Like the TLS files, the file is looked at again at most
// once per FileCheckInterval, by a request that finds it due (no request waits for that), and
// at once by Reload (SIGHUP). A file that no longer loads (unreadable, no token in it) is
// refused: the last good tokens stay in force, which is logged once and reported to observe
// until the file loads again.
//
// Tokens are kept and compared as SHA-256 digests, in constant time, against every accepted
// token, so that neither timing nor the answer tells which part of a guess was wrong. They are
// never logged.
type Tokens struct {
	file    string
	log     *slog.Logger
	observe func(failing bool)

	digests atomic.Pointer[[][sha256.Size]byte]
	check   recheck

	mu      sync.Mutex // one reload at a time; guards what follows
	last    string     // the file's contents last tried
	readErr string     // the last read's error, so that a file that stays unreadable counts once
	failing bool
}

// NewTokens returns the tokens of list, or of file when file is set (list is then ignored).
// At start, a file that does not load is an error. observe (nil for none) is told whether the
// file fails to load after each look that finds it changed. With no tokens at all, Enabled is
// false: the server is open.
func NewTokens(list []string, file string, log *slog.Logger, observe func(failing bool)) (*Tokens, error) {
	if observe == nil {
		observe = func(bool) {}
	}
	t := &Tokens{file: file, log: log, observe: observe, check: recheck{now: time.Now}}
	if file == "" {
		t.store(trimmed(list))
		return t, nil
	}
	b, err := ReadSettingFile(file)
	if err != nil {
		return nil, fmt.Errorf("BIGSEG_API_TOKENS_FILE: %w", err)
	}
	tokens, err := parseTokens(string(b))
	if err != nil {
		return nil, err
	}
	t.store(tokens)
	t.last, t.check.checked = string(b), time.Now()
	observe(false)
	return t, nil
}

func trimmed(list []string) []string {
	var out []string
	for _, s := range list {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseTokens reads a token file: one token a line.
func parseTokens(s string) ([]string, error) {
	var out []string
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("BIGSEG_API_TOKENS_FILE: no token in it")
	}
	return out, nil
}

func (t *Tokens) store(tokens []string) {
	d := make([][sha256.Size]byte, len(tokens))
	for i, tok := range tokens {
		d[i] = sha256.Sum256([]byte(tok))
	}
	t.digests.Store(&d)
}

// Enabled says whether any token is required: false means the server is open.
func (t *Tokens) Enabled() bool { return t != nil && len(*t.digests.Load()) > 0 }

// Valid says whether token is one of the accepted tokens. It looks at the file again first
// if that is due, without waiting for a look in progress.
func (t *Tokens) Valid(token string) bool {
	if t.file != "" && t.check.due() {
		t.reloadIfChanged()
		t.check.done()
	}
	digest := sha256.Sum256([]byte(token))
	match := 0
	for _, d := range *t.digests.Load() {
		match |= subtle.ConstantTimeCompare(digest[:], d[:])
	}
	return match == 1
}

// Reload looks at the file now (SIGHUP), and waits for a look in progress.
func (t *Tokens) Reload() {
	if t.file != "" {
		t.reloadIfChanged()
	}
}

// reloadIfChanged takes the file's tokens if it changed since last tried and loads.
func (t *Tokens) reloadIfChanged() {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, err := ReadSettingFile(t.file)
	switch {
	case err == nil && string(b) == t.last:
		return
	case err != nil && err.Error() == t.readErr: // still unreadable: already said
		return
	case err != nil:
		t.readErr = err.Error()
		err = fmt.Errorf("BIGSEG_API_TOKENS_FILE: %w", err)
	default:
		t.last, t.readErr = string(b), ""
		var tokens []string
		if tokens, err = parseTokens(string(b)); err == nil {
			t.store(tokens)
			t.failing = false
			t.observe(false)
			t.log.Info("API tokens reloaded", "tokens", len(tokens))
			return
		}
	}
	if !t.failing {
		t.log.Error("API tokens file changed but does not load; the last good tokens stay in force", "err", err.Error())
	}
	t.failing = true
	t.observe(true)
}
