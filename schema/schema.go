// Package schema holds the engine's interface documents: openapi.yaml, the
// OpenAPI 3.1 document every route follows, embedded here so the binary
// serves the document it was built with; and, in package postgres below, the
// read models' migrations.
package schema

import (
	"bytes"
	_ "embed"
)

//go:embed openapi.yaml
var openapi []byte

// OpenAPI returns openapi.yaml as the binary was built with it; the copy is
// the caller's.
func OpenAPI() []byte { return bytes.Clone(openapi) }
