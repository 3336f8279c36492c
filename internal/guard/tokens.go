package guard

import (
	"context"
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

	entries  atomic.Pointer[[]token]
	check    recheck
	failures atomic.Int64 // tokens refused since the last log line that counted them
	failSaid atomic.Int64 // when that line was written, unix nanoseconds

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
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Tokens{file: file, known: known, log: log, observe: observe, check: recheck{now: time.Now}}
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
// The error of a bad line names its number, never its token nor what stands where the
// environments should (a label or a second token, by mistake, is as secret). A token given on
// two lines is an error: which scope was meant cannot be told. short counts the tokens
// shorter than MinTokenLength.
func (t *Tokens) parse(s string) (out []token, short int, err error) {
	s = strings.TrimPrefix(s, "\uFEFF")  // a byte order mark, as some editors write
	first := map[[sha256.Size]byte]int{} // the line of each token
	n := 0
	for line := range strings.Lines(s) {
		n++
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		entry := token{digest: sha256.Sum256([]byte(fields[0]))}
		if m, seen := first[entry.digest]; seen {
			return nil, 0, fmt.Errorf("BIGSEG_API_TOKENS_FILE:%d: the token of line %d again: give each token once, with all its environments", n, m)
		}
		first[entry.digest] = n
		short += isShort(fields[0])
		switch {
		case len(fields) > 2:
			return nil, 0, fmt.Errorf("BIGSEG_API_TOKENS_FILE:%d: want a token, then optionally its environments, comma-separated", n)
		case len(fields) == 2:
			for _, env := range strings.Split(fields[1], ",") {
				if !slices.Contains(t.known, env) {
					return nil, 0, fmt.Errorf("BIGSEG_API_TOKENS_FILE:%d: the token's environments name one that is not served (%s)",
						n, strings.Join(t.known, ", "))
				}
				entry.scope = append(entry.scope, env)
			}
		}
		out = append(out, entry)
	}
	if len(out) == 0 {
		return nil, 0, errors.New("BIGSEG_API_TOKENS_FILE: no token in it")
	}
	return out, short, nil
}

// MinTokenLength is the length under which a token is said, at start and at each reload, to
// be guessable: a token is the only thing between a client and the data, and a client may try
// tens of thousands a second (over as many connections as it likes). 32 hexadecimal digits
// are 128 bits.
const MinTokenLength = 32

func isShort(token string) int {
	if len(token) < MinTokenLength {
		return 1
	}
	return 0
}

// warnShort logs how many tokens are short, if any (never which).
func (t *Tokens) warnShort(short int) {
	if short > 0 {
		t.log.Warn("some API tokens are short enough to be guessed: use random ones of min_length characters at least (openssl rand -hex 16)",
			"short", short, "min_length", MinTokenLength)
	}
}

// FailureLogInterval is the least time between two log lines that count the tokens refused.
const FailureLogInterval = time.Minute

// failed counts a token refused: the first of them is logged at once, then at most one line per
// FailureLogInterval, with the count since the last.
func (t *Tokens) failed() {
	t.failures.Add(1)
	now, last := t.check.now().UnixNano(), t.failSaid.Load()
	if last != 0 && now-last < int64(FailureLogInterval) || !t.failSaid.CompareAndSwap(last, now) {
		return
	}
	t.log.Warn("API tokens refused (wrong or revoked) since the last such line", "refused", t.failures.Swap(0))
}

// Enabled says whether any token is required: false means the server is open.
func (t *Tokens) Enabled() bool { return t != nil && len(*t.entries.Load()) > 0 }

// Valid says whether token is one of the accepted tokens, whatever it opens.
func (t *Tokens) Valid(token string) bool { return t.Scope(token) != nil }

// Scope is what token opens: nil if it is no accepted token; else Opens says which
// environments. It looks at the file again first if that is due, without waiting for a look
// in progress.
func (t *Tokens) Scope(presented string) *Scope {
	t.recheck()
	return t.scopeOf(t.entries.Load(), sha256.Sum256([]byte(presented)))
}

// recheck looks at the file again if that is due.
func (t *Tokens) recheck() {
	if t.file != "" && t.check.due() {
		t.reloadIfChanged()
		t.check.done()
	}
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
	t.recheck()
	s := &Session{t: t, digest: sha256.Sum256([]byte(presented)), entries: t.entries.Load()}
	if s.scope = t.scopeOf(s.entries, s.digest); s.scope == nil {
		return nil
	}
	return s
}

// Scope is what the session's token opens now: nil once it is revoked. It costs a look at
// the clock while the tokens are unchanged. A nil Session opens nothing.
func (s *Session) Scope() *Scope {
	if s == nil {
		return nil
	}
	s.t.recheck()
	if e := s.t.entries.Load(); e != s.entries {
		s.entries, s.scope = e, s.t.scopeOf(e, s.digest)
	}
	return s.scope
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

// Run looks at the tokens file again every FileCheckInterval until ctx ends, taking its tokens
// if it changed and loads; then it returns nil. Without a file (or on a nil Tokens) there is
// nothing to look at, and it returns nil at once. Start it once, beside the servers.
func (t *Tokens) Run(ctx context.Context) error {
	if t == nil || t.file == "" {
		return nil
	}
	return watch(ctx, t.reloadIfChanged)
}

// Reload looks at the file now (SIGHUP), and waits for a look in progress.
func (t *Tokens) Reload() {
	if t != nil && t.file != "" {
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
		var short int
		if entries, short, err = t.parse(string(b)); err == nil {
			t.entries.Store(&entries)
			t.warnShort(short)
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
