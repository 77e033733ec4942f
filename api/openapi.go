package api

import _ "embed"

// openAPI is the API's OpenAPI 3 document, served at /v1/openapi.json.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI 3 document.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }
