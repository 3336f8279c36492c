// Package guard holds the limits bigseg keeps under hostile clients, in the shapes the
// standard library knows, for every listener alike (HTTP and the Redis protocol):
//
//   - Tokens: the bearer tokens accepted, re-read from their file when it changes;
//   - Certificates: the TLS certificate (and client CA) served, re-read likewise, as a
//     tls.Config that looks the files up per handshake.
//
// It takes plain values (limits, durations, files, a function that writes a refusal) and
// knows nothing of the handlers or of how bigseg is configured.
package guard
