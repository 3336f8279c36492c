// Package guard holds the defences bigseg keeps under hostile clients, for every listener
// alike (HTTP and the Redis protocol), in the shapes the standard library knows: a
// net.Listener and the net.Conn it gives, func(http.Handler) http.Handler middleware, a
// tls.Config. The servers take them ready-made and never know which limits exist: cmd/server
// builds each from its settings. The package takes plain values (limits, durations, files, a
// Refuse that writes a refusal) and knows nothing of the handlers or of how bigseg is
// configured. docs/security.md says what each defence answers, and names the tests that hold it.
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
//     half the connections, so that streams cannot take them all. cmd/server builds it for
//     handlers.Config.Streams.
//   - Shedder (shed.go): at most N lookups running, N more waiting briefly, the rest refused,
//     over both listeners at once. cmd/server makes one and gives its Middleware to handlers
//     (handlers.Config.Shed: 429) and itself to resp (resp.Config.Shed: Admit and Release,
//     BUSY with TooBusy).
//   - Bodies (bodies.go): one memory budget for the request bodies being read and answered;
//     when requests wait for memory, the one its client paces longest (a stalled body, an
//     answer not read) is cut to make room. cmd/server makes it (handlers.Config.Bodies);
//     handlers puts its Limit before the batch lookups, and reads the body with BodyBytes.
//   - CommandConn (commands.go): a Redis-protocol command bounded in bytes, and in time once it
//     has begun to arrive; ErrCommandTooLong is its error. resp wraps each connection in one.
//   - Tokens, Scope and Session (tokens.go): the bearer tokens accepted, compared as SHA-256
//     digests in constant time, each opening every environment or some; a Session (a
//     connection's AUTH, a status stream) follows the tokens as they are reloaded, so a
//     revoked token ends what it holds open. The file's format and its reloading are in
//     tokenfile.go. cmd/server makes them (NewTokens), runs Run and calls Reload on SIGHUP;
//     handlers and resp take them (handlers.Config.Tokens, resp.Config.Tokens).
//   - Require and SessionOf (auth.go): the HTTP side of Tokens: the middleware that checks
//     the Authorization header (401, 403, 400), and the session of a held request. handlers.
//   - Certificates (certs.go): the TLS certificate and key, and the client CA of mutual TLS, as
//     a tls.Config that serves the last good ones. cmd/server makes it, runs Run, calls Reload
//     on SIGHUP, and gives ServerConfig to every listener that serves TLS.
//   - ReadSettingFile (files.go): a file a setting names, read whole up to
//     MaxSettingFileBytes. Tokens, Certificates, and cmd/server's configuration for its own
//     files.
//   - Refuse (refuse.go): how a middleware turns a request away; handlers.Error is bigseg's.
//
// Files are re-read in the background, never on a request or a handshake: Tokens.Run and
// Certificates.Run look at their files once per FileCheckInterval until their context ends
// (the loop is watch, in files.go), and Reload looks at once. A request or handshake only
// loads what the last look built (an atomic pointer). Files that no longer load leave the last
// good tokens or certificate in force, said once in the log and to the observe function
// (the reload metrics) until they load again.
package guard
