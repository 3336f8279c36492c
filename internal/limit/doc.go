// Package limit bounds how much a client may ask of bigseg, on every listener alike (HTTP and
// the Redis protocol): connections, request bodies, status streams, the
// bytes and time of a Redis-protocol command. Its sibling, package auth, says who may ask. The
// defences come in the shapes the standard library knows: a net.Listener and the net.Conn it
// gives, and func(http.Handler) http.Handler middleware. The servers take them ready-made and
// never know which limits exist: cmd/server builds each from its settings and composes it.
// The package takes plain values (limits, durations, a Refuse that writes a refusal) and knows
// nothing of the handlers or of how bigseg is configured. docs/security.md says what each
// defence answers, and names the tests that hold it.
//
// Each mechanism, the file it lives in (its test beside it), and who uses it:
//
//   - Listener (listener.go): at most N connections open at once; at the limit, Accept makes
//     room by closing the connection that holds its slot unused longest (silent since it
//     connected, else idle between requests, else stuck writing an answer its client does
//     not read). cmd/server wraps every listener in one (the API's, the Redis protocol's, the
//     side listeners') and gives http.Server its ConnState; resp calls Busy around each
//     command (resp.Config.Listener).
//   - Streams and Listener.MaxStreams (streams.go): at most N status streams at once, held to
//     half the connections, so that streams cannot take them all. cmd/server puts it in
//     handlers.Config.Streams, after the token check.
//   - Bodies (bodies.go): one memory budget for the request bodies being read and answered;
//     when requests wait for memory, the one its client paces longest (a stalled body, an
//     answer not read) is cut to make room. cmd/server makes it and puts its Limit in
//     handlers.Config.Batches, after the token check, with
//     handlers.BatchUses as the memory a body's lookups take; handlers reads the body from its
//     Bytes.
//   - CommandConn (commands.go): a Redis-protocol command bounded in bytes, and in time once it
//     has begun to arrive; ErrCommandTooLong is its error. resp wraps each connection in one.
//   - Refuse (refuse.go): how a middleware turns a request away; handlers.Error is bigseg's.
package limit
