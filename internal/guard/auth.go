package guard

import (
	"net/http"
	"strings"
)

// Refuse writes an answer that turns a request away: its status code and a message for the
// caller. Each server has its own (bigseg's writes JSON and closes the connection).
type Refuse func(w http.ResponseWriter, r *http.Request, code int, msg string)

// Require is middleware that lets a request through only with exactly one
// "Authorization: Bearer <token>" header naming one of the tokens: 401 with WWW-Authenticate
// otherwise, and 400 for a request with more than one Authorization header, which a proxy
// and the server could read differently.
func (t *Tokens) Require(refuse Refuse) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch h := r.Header["Authorization"]; {
			case len(h) > 1:
				refuse(w, r, http.StatusBadRequest, "give the Authorization header once")
			case len(h) == 0 || !t.Valid(bearer(h[0])):
				w.Header().Set("WWW-Authenticate", `Bearer realm="bigseg"`)
				refuse(w, r, http.StatusUnauthorized, "a valid bearer token is required")
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

// bearer is the token of an Authorization header value, "" if it names another scheme.
func bearer(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
