// Package api holds bigseg's OpenAPI description, embedded so that the server can serve it at
// /openapi.yaml and tests can check responses against it.
package api

import _ "embed"

// OpenAPI is the contents of openapi.yaml (a string: no one can change what is served).
//
//go:embed openapi.yaml
var OpenAPI string
