package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The tokens file: its format (parse), and its reading again while the server runs (Run, on
// a ticker, and Reload, on SIGHUP), off the request path: a request only loads t.entries.

// Run looks at the tokens file again every FileCheckInterval until ctx ends, taking its tokens
// if it changed and loads; then it returns nil. Without a file (or on a nil Tokens) there is
// nothing to look at, and it returns nil at once. Start it once, beside the servers.
func (t *Tokens) Run(ctx context.Context) error {
	if t == nil || t.file == "" {
		return nil
	}
	return watch(ctx, t.reloadIfChanged)
}

// Reload looks at the file now (SIGHUP), after any look in progress: once it returns, the
// tokens in force are the file's as it is now, or, if it does not load, the last good ones.
func (t *Tokens) Reload() {
	if t != nil && t.file != "" {
		t.reloadIfChanged()
	}
}

// reloadIfChanged takes the file's tokens if it changed since last tried and loads. A file
// that becomes readable again as it was, after a failure to read it, is in force again: the
// failure is over, and the next one is logged.
func (t *Tokens) reloadIfChanged() {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, err := ReadSettingFile(t.file)
	switch {
	case err != nil && err.Error() == t.readErr: // still unreadable: already said
		return
	case err != nil:
		t.readErr = err.Error()
		t.fail(fmt.Errorf("BIGSEG_API_TOKENS_FILE: %w", err))
		return
	}
	unreadable := t.readErr != ""
	t.readErr = ""
	if string(b) == t.last {
		if unreadable && !t.lastBad {
			t.failing = false
			t.observe(false)
			t.log.Info("API tokens file readable again, unchanged: its tokens stay in force")
		}
		return
	}
	t.last = string(b)
	entries, short, err := t.parse(t.last)
	if t.lastBad = err != nil; t.lastBad {
		t.fail(err)
		return
	}
	t.entries.Store(&entries)
	t.warnShort(short)
	t.failing = false
	t.observe(false)
	t.log.Info("API tokens reloaded", "tokens", len(entries))
}

// fail reports that the file does not load, and logs it once a failure.
func (t *Tokens) fail(err error) {
	if !t.failing {
		t.log.Error("API tokens file changed but does not load; the last good tokens stay in force", "err", err.Error())
	}
	t.failing = true
	t.observe(true)
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
