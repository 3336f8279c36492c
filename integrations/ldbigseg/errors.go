package ldbigseg

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// ErrStoreUnavailable is in the error of a call that bigseg answered with "my store cannot be
// read": a 503 whose status is STORE_ERROR, a 200 lookup whose status is STORE_ERROR (bigseg
// read the context but marks its store unavailable, as the SDKs do), or a /status with
// "available": false. Test for it with errors.Is.
var ErrStoreUnavailable = errors.New("bigseg's store is unavailable")

// ErrClosed is in the error of a call on a closed store, and of a request that Close
// interrupted.
var ErrClosed = errors.New("the bigseg store is closed")

// HTTPError is an answer whose status code is not 200, from bigseg or from a proxy in front of
// it. Find it with errors.As. bigseg answers 404 for an environment it does not serve
// (StoreBuilder.Environment), and, while it serves several, for a lookup that names none; and
// 403 for a bearer token that does not open the environment asked about.
type HTTPError struct {
	// StatusCode is the response's status code.
	StatusCode int
	// Message is the body's "error" (bigseg's errors are JSON), or the first line of a
	// plain-text body; at most 200 bytes, without control characters, and never the bearer
	// token.
	Message string
	// RetryAfter is the Retry-After header as sent (bigseg sends it with 429), or "".
	RetryAfter string

	environment string // the store's Environment, or "": for the hint
}

func (e *HTTPError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", e.StatusCode)
	if hint := e.hint(); hint != "" {
		b.WriteString(" (" + hint + ")")
	}
	if e.RetryAfter != "" {
		b.WriteString(", Retry-After " + e.RetryAfter)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// hint says what an answer most likely means for a user configuring the store.
func (e *HTTPError) hint() string {
	switch {
	case e.StatusCode == http.StatusNotFound && e.environment != "":
		return fmt.Sprintf("bigseg does not serve environment %q, or the base URL is not bigseg's", e.environment)
	case e.StatusCode == http.StatusNotFound:
		return "no such route: is the base URL bigseg's? One serving several environments needs Environment set"
	case e.StatusCode == http.StatusForbidden && e.environment != "":
		return fmt.Sprintf("the bearer token does not open environment %q", e.environment)
	case e.StatusCode == http.StatusForbidden:
		return "forbidden: a bearer token scoped to some environments needs Environment set to one of them"
	}
	return statusHints[e.StatusCode]
}

// statusHints say what other answers most likely mean.
var statusHints = map[int]string{
	400: "bigseg rejected the request",
	401: "bigseg requires a bearer token and did not accept this one, or none was set",
	429: "too many requests: a rate limit in front of bigseg, most likely",
	301: redirectHint, 302: redirectHint, 303: redirectHint, 307: redirectHint, 308: redirectHint,
}

const redirectHint = "a redirect, which the store does not follow: set the base URL to bigseg's own address"

// maxMessageBytes bounds the part of an answer that goes into an error.
const maxMessageBytes = 200

// cleanMessage makes text from an answer fit for an error message: its first line, without
// control characters, at most maxMessageBytes, with every occurrence of the bearer token
// replaced (a broken or hostile server could echo the request's headers).
func cleanMessage(s, token string) string {
	if token != "" {
		s = strings.ReplaceAll(s, token, "[bearer token]")
	}
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return -1
		}
		return r
	}, s)
	if len(s) > maxMessageBytes {
		cut := maxMessageBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return strings.TrimSpace(s)
}
