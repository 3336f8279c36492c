package auth

import (
	"net/http"
	"strings"
)

// The HTTP side of Tokens: the middleware that checks a request's bearer token, and whether a
// request's token opens an environment.

// Require is middleware that lets a request through only with exactly one
// "Authorization: Bearer <token>" header naming one of the tokens that opens the request's
// environment, which env says ("" for a request about every environment): 401 with
// WWW-Authenticate for no valid token, 403 for a token of other environments, and 400 for a
// request with more than one Authorization header, which a proxy and the server could read
// differently. refuse writes the refusal in the server's format (bigseg's is handlers.Error).
// With no tokens (Enabled false) it lets every request through.
func (t *Tokens) Require(refuse func(w http.ResponseWriter, r *http.Request, code int, msg string), env func(*http.Request) string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if !t.Enabled() {
			return next
		}
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

// Authorizes says whether r carries exactly one bearer token that opens env ("" for every
// environment), as Require would let it through: for a handler that shows more to those
// (bigseg's /status), and for one that holds its request open (a status stream), to end it
// once its token is revoked. With no tokens it always says yes.
func (t *Tokens) Authorizes(r *http.Request, env string) bool {
	if !t.Enabled() {
		return true
	}
	h := r.Header["Authorization"]
	return len(h) == 1 && t.Scope(bearer(h[0])).Opens(env)
}

// bearer is the token of an Authorization header value, "" if it names another scheme.
func bearer(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
