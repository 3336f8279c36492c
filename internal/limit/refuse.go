package limit

import "net/http"

// Refuse writes an answer that turns a request away: its status code and a message for the
// caller. Each server has its own (bigseg's is handlers.Error, which writes JSON and closes
// the connection); every middleware here takes one, so that a refusal reads like any other
// error of that server. It is an alias, so that a server may declare the same signature
// without importing this package.
type Refuse = func(w http.ResponseWriter, r *http.Request, code int, msg string)
