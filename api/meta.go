package api

import (
	"net/http"
	"runtime"

	"github.com/composebox/composebox/orchestrator"
)

// APIVersion is the prefix of every route. It changes only when a route or a body changes in a
// way that a client written for it cannot follow.
const APIVersion = "v1"

// APIRevision counts what APIVersion gained that a client may rely on: raise it with every
// route, request or response field, or error kind added. A client states the lowest revision
// it needs, and works with every server of its APIVersion whose revision is at least that; it
// reads both from /v1/version, which every server keeps answering, so that it can name the
// mismatch instead of failing on a body it cannot decode.
const APIRevision = 5

// Version is the body of /v1/version.
type Version struct {
	Version     string `json:"version"`
	Go          string `json:"go"`
	Compose     string `json:"compose"`
	API         string `json:"api"`
	APIRevision int    `json:"api_revision"`
}

func (s *Server) getVersion(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, Version{Version: s.opts.Version, Go: runtime.Version(),
		Compose: orchestrator.ComposeVersion(), API: APIVersion, APIRevision: APIRevision})
	return nil
}

func (s *Server) getDoctor(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.opts.Doctor(r.Context()))
	return nil
}

func (s *Server) getOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
	return nil
}
