// Package auth says who may ask bigseg: the bearer tokens accepted and the environments each
// opens, and the TLS certificates (and the client CA of mutual TLS) that every listener
// serves. Its sibling, package limit, says how much a client may ask. Both take plain values
// and know nothing of the servers that use them or of how bigseg is configured: cmd/server
// builds them from its settings and composes them around the servers. docs/security.md says
// what each answers, and names the tests that hold it.
//
// Each mechanism, the file it lives in (its test beside it), and who uses it:
//
//   - Tokens, Scope and Session (tokens.go): the bearer tokens accepted, compared as SHA-256
//     digests in constant time, each opening every environment or some; a Session (a
//     connection's AUTH) follows the tokens as they are reloaded, so a revoked token ends
//     what it holds open. The file's format and its reloading are in tokenfile.go. cmd/server
//     makes them (NewTokens), runs Run and calls Reload on SIGHUP, composes Require into
//     handlers' chains, and gives them to resp (resp.Config.Tokens).
//   - Require and Authorizes (auth.go): the HTTP side of Tokens: the middleware that checks
//     the Authorization header (401, 403, 400), and whether a request's token opens an
//     environment (handlers.Config.Authorized: /status's details, a status stream's token
//     still valid). cmd/server puts both in handlers.Config.
//   - Certificates (certs.go): the TLS certificate and key, and the client CA of mutual TLS, as
//     a tls.Config that serves the last good ones. cmd/server makes it, runs Run, calls Reload
//     on SIGHUP, and gives ServerConfig to every listener that serves TLS.
//   - ReadSettingFile and LoadKeyPair (files.go): a file a setting names, read whole up to
//     MaxSettingFileBytes. Tokens, Certificates, package healthcheck (the certificate it
//     presents under mutual TLS), and cmd/server's configuration for its own files.
//   - CheckTokens and CheckTLS (check.go): what is wrong with the token and TLS settings
//     together, at start, naming their variables. cmd/server's validate.
//
// Files are re-read in the background, never on a request or a handshake: Tokens.Run and
// Certificates.Run look at their files once per FileCheckInterval until their context ends
// (the loop is watch, in files.go), and Reload looks at once. A request or handshake only
// loads what the last look built (an atomic pointer). Files that no longer load leave the last
// good tokens or certificate in force, said once in the log and to the observe function
// (the reload metrics) until they load again.
package auth
