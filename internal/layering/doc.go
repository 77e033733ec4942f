// Package layering holds the test that keeps each backend in its home: the CLI and the server
// go through the library, the Kubernetes backend depends on the contract and neutral helpers
// only, and the contract names no engine. It has no code.
package layering
