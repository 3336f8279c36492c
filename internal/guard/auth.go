package guard

import (
	"net/http"
	"strings"
)

// The HTTP side of Tokens: the middleware that checks a request's bearer token, and the
// session a held request (a status stream) keeps.

// Require is middleware that lets a request through only with exactly one
// "Authorization: Bearer <token>" header naming one of the tokens that opens the request's
// environment, which env says ("" for a request about every environment): 401 with
// WWW-Authenticate for no valid token, 403 for a token of other environments, and 400 for a
// request with more than one Authorization header, which a proxy and the server could read
// differently.
func (t *Tokens) Require(refuse Refuse, env func(*http.Request) string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := r.Header["Authorization"]
			if len(h) > 1 {
				refuse(w, r, http.StatusBadRequest, "give the Authorization header once")
				return
			}
			var scope *Scope
			if len(h) == 1 {
				scope = t.Scope(bearer(h[0]))
			}
			switch e := env(r); {
			case scope == nil:
				w.Header().Set("WWW-Authenticate", `Bearer realm="bigseg"`)
				refuse(w, r, http.StatusUnauthorized, "a valid bearer token is required")
			case !scope.Opens(e) && e == "":
				refuse(w, r, http.StatusForbidden, "this token does not open every environment: ask for one, under /environments/{env}/")
			case !scope.Opens(e):
				refuse(w, r, http.StatusForbidden, "this token does not open environment "+e)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

// SessionOf is the session of the request's bearer token, nil without a valid one: for a
// handler that holds its request open (a status stream), to end it once its token is revoked.
func (t *Tokens) SessionOf(r *http.Request) *Session {
	return t.Session(bearer(r.Header.Get("Authorization")))
}

// bearer is the token of an Authorization header value, "" if it names another scheme.
func bearer(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
