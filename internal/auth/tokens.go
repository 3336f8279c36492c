package auth

import (
	"crypto/sha256"
	"crypto/subtle"
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
// rotated or revoked without a restart: by Run, once per FileCheckInterval, and at once by
// Reload (SIGHUP). Requests only load the tokens last read; none reads the file (see
// tokenfile.go). A file that no longer loads (unreadable, no token in it) is refused: the
// last good tokens stay in force, which is logged once and reported to observe until the file
// loads again.
//
// Tokens are kept and compared as SHA-256 digests, in constant time, against every accepted
// token, so that neither timing nor the answer tells which part of a guess was wrong. They are
// never logged.
type Tokens struct {
	file    string
	known   []string // the environments a scope may name
	log     *slog.Logger
	observe func(failing bool)

	entries  atomic.Pointer[[]token]
	failures atomic.Int64 // tokens refused since the last log line that counted them
	failSaid atomic.Int64 // when that line was written, unix nanoseconds

	mu      sync.Mutex // one reload at a time; guards what follows
	last    string     // the file's contents last tried
	lastBad bool       // whether last does not load
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
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Tokens{file: file, known: known, log: log, observe: observe}
	if file == "" {
		var entries []token
		short := 0
		for _, s := range trimmed(list) {
			entries = append(entries, token{digest: sha256.Sum256([]byte(s))})
			short += isShort(s)
		}
		t.entries.Store(&entries)
		t.warnShort(short)
		return t, nil
	}
	b, err := ReadSettingFile(file)
	if err != nil {
		return nil, fmt.Errorf("BIGSEG_API_TOKENS_FILE: %w", err)
	}
	entries, short, err := t.parse(string(b))
	if err != nil {
		return nil, err
	}
	t.entries.Store(&entries)
	t.warnShort(short)
	t.last = string(b)
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

// failureLogInterval is the least time between two log lines that count the tokens refused.
const failureLogInterval = time.Minute

// failed counts a token refused: the first of them is logged at once, then at most one line per
// failureLogInterval, with the count since the last.
func (t *Tokens) failed() {
	t.failures.Add(1)
	now, last := time.Now().UnixNano(), t.failSaid.Load()
	if last != 0 && now-last < int64(failureLogInterval) || !t.failSaid.CompareAndSwap(last, now) {
		return
	}
	t.log.Warn("API tokens refused (wrong or revoked) since the last such line", "refused", t.failures.Swap(0))
}

// Enabled says whether any token is required: false means the server is open.
func (t *Tokens) Enabled() bool { return t != nil && len(*t.entries.Load()) > 0 }

// Scope is what token opens: nil if it is no accepted token; else Opens says which
// environments.
func (t *Tokens) Scope(presented string) *Scope {
	return t.scopeOf(t.entries.Load(), sha256.Sum256([]byte(presented)))
}

// scopeOf is what the token of digest opens among entries, nil if none is it; a miss is
// counted for the log (see failed).
func (t *Tokens) scopeOf(entries *[]token, digest [sha256.Size]byte) *Scope {
	found := -1
	for i, e := range *entries {
		if subtle.ConstantTimeCompare(digest[:], e.digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		t.failed()
		return nil
	}
	return &Scope{envs: (*entries)[found].scope}
}

// Session is a token presented once and then held, by a Redis-protocol connection after its
// AUTH or by a status stream: its Scope follows the tokens as they are reloaded, so that a
// token revoked opens nothing from the next command on, and one rescoped opens what it now
// does. A Session is used by one goroutine at a time.
type Session struct {
	t       *Tokens
	digest  [sha256.Size]byte
	entries *[]token // the tokens scope was read from
	scope   *Scope
}

// Session returns the session of token, nil if it is no accepted token.
func (t *Tokens) Session(presented string) *Session {
	s := &Session{t: t, digest: sha256.Sum256([]byte(presented)), entries: t.entries.Load()}
	if s.scope = t.scopeOf(s.entries, s.digest); s.scope == nil {
		return nil
	}
	return s
}

// Scope is what the session's token opens now: nil once it is revoked. It costs an atomic
// load while the tokens are unchanged. A nil Session opens nothing.
func (s *Session) Scope() *Scope {
	if s == nil {
		return nil
	}
	if e := s.t.entries.Load(); e != s.entries {
		s.entries, s.scope = e, s.t.scopeOf(e, s.digest)
	}
	return s.scope
}

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
