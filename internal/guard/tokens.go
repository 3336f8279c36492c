package guard

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Tokens is the set of bearer tokens a server accepts: a fixed list, each opening every
// environment, or the lines of a file (# comments and blank lines ignored), each a token
// followed, optionally, by the comma-separated environments it alone opens
// ("tok-staging staging,qa"); the file is read again when it changes, so that a token is
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
	known   []string // the environments a scope may name
	log     *slog.Logger
	observe func(failing bool)

	entries atomic.Pointer[[]token]
	check   recheck

	mu      sync.Mutex // one reload at a time; guards what follows
	last    string     // the file's contents last tried
	readErr string     // the last read's error, so that a file that stays unreadable counts once
	failing bool
}

// token is one accepted token: its digest, and the environments it opens (nil: every one).
type token struct {
	digest [sha256.Size]byte
	scope  []string
}

// NewTokens returns the tokens of list, or of file when file is set (list is then ignored);
// environments are those a file's scopes may name. At start, a file that does not load is an
// error. observe (nil for none) is told whether the file fails to load after each look that
// finds it changed. With no tokens at all, Enabled is false: the server is open.
func NewTokens(list []string, file string, log *slog.Logger, observe func(failing bool), environments ...string) (*Tokens, error) {
	known := environments
	if observe == nil {
		observe = func(bool) {}
	}
	t := &Tokens{file: file, known: known, log: log, observe: observe, check: recheck{now: time.Now}}
	if file == "" {
		var entries []token
		for _, s := range trimmed(list) {
			entries = append(entries, token{digest: sha256.Sum256([]byte(s))})
		}
		t.entries.Store(&entries)
		return t, nil
	}
	b, err := ReadSettingFile(file)
	if err != nil {
		return nil, fmt.Errorf("BIGSEG_API_TOKENS_FILE: %w", err)
	}
	entries, err := t.parse(string(b))
	if err != nil {
		return nil, err
	}
	t.entries.Store(&entries)
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

// parse reads a token file: one token a line, then optionally the environments it opens.
// The error of a bad line names its number, never its token.
func (t *Tokens) parse(s string) ([]token, error) {
	var out []token
	n := 0
	for line := range strings.Lines(s) {
		n++
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		entry := token{digest: sha256.Sum256([]byte(fields[0]))}
		switch {
		case len(fields) > 2:
			return nil, fmt.Errorf("BIGSEG_API_TOKENS_FILE:%d: want a token, then optionally its environments, comma-separated", n)
		case len(fields) == 2:
			for _, env := range strings.Split(fields[1], ",") {
				if !slices.Contains(t.known, env) {
					return nil, fmt.Errorf("BIGSEG_API_TOKENS_FILE:%d: the token is scoped to %q, which is not an environment served (%s)",
						n, env, strings.Join(t.known, ", "))
				}
				entry.scope = append(entry.scope, env)
			}
		}
		out = append(out, entry)
	}
	if len(out) == 0 {
		return nil, errors.New("BIGSEG_API_TOKENS_FILE: no token in it")
	}
	return out, nil
}

// Enabled says whether any token is required: false means the server is open.
func (t *Tokens) Enabled() bool { return t != nil && len(*t.entries.Load()) > 0 }

// Valid says whether token is one of the accepted tokens, whatever it opens.
func (t *Tokens) Valid(token string) bool { return t.Scope(token) != nil }

// Scope is what token opens: nil if it is no accepted token; else Opens says which
// environments. It looks at the file again first if that is due, without waiting for a look
// in progress.
func (t *Tokens) Scope(presented string) *Scope {
	if t.file != "" && t.check.due() {
		t.reloadIfChanged()
		t.check.done()
	}
	digest := sha256.Sum256([]byte(presented))
	found := -1
	entries := *t.entries.Load()
	for i, e := range entries {
		if subtle.ConstantTimeCompare(digest[:], e.digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil
	}
	return &Scope{envs: entries[found].scope}
}

// Opens says whether token opens environment env ("": every environment).
func (t *Tokens) Opens(presented, env string) bool { return t.Scope(presented).Opens(env) }

// Scope is the environments a token opens.
type Scope struct{ envs []string } // nil: every one

// Opens says whether the scope opens env; "" asks for every environment. A nil scope (no
// valid token) opens nothing.
func (s *Scope) Opens(env string) bool {
	switch {
	case s == nil:
		return false
	case s.envs == nil:
		return true
	}
	return env != "" && slices.Contains(s.envs, env)
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
		var entries []token
		if entries, err = t.parse(string(b)); err == nil {
			t.entries.Store(&entries)
			t.failing = false
			t.observe(false)
			t.log.Info("API tokens reloaded", "tokens", len(entries))
			return
		}
	}
	if !t.failing {
		t.log.Error("API tokens file changed but does not load; the last good tokens stay in force", "err", err.Error())
	}
	t.failing = true
	t.observe(true)
}
