package guard

import "net/http"

// Refuse writes an answer that turns a request away: its status code and a message for the
// caller. Each server has its own (bigseg's is handlers.Error, which writes JSON and closes
// the connection); every middleware here takes one, so that a refusal reads like any other
// error of that server.
type Refuse func(w http.ResponseWriter, r *http.Request, code int, msg string)
