// Package api serves the orchestrator over HTTP/1.1 + JSON: the server behind `composebox
// serve`, for runners written in other languages (the Python client in clients/python).
//
// openapi.json, embedded and served at /v1/openapi.json, is the reference for every route,
// body and status; routes.go holds the same routes as a table, and a test fails when the two
// disagree.
//
// Everything the server creates belongs to a lease, which its client opens and heartbeats. A
// lease that misses its heartbeats has its samples and tasks removed, so a client that dies
// leaves nothing behind while the server lives; Close removes what is left when the server
// stops. A server that is killed leaves samples owned by its process, which are stale to
// `composebox cleanup --stale` and to the reaper like any other process's.
//
// The server holds no unbounded buffer: JSON bodies are size-limited, exec output is kept by
// the library's bounded tails, streams write with a deadline so that a client that stops
// reading loses its stream instead of pinning the command, and an events subscriber that
// falls behind loses events (and is told how many) instead of blocking the orchestrator.
package api
