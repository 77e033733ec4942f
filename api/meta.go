package api

import (
	"net/http"
	"runtime"

	"github.com/composebox/composebox/lifecycle"
)

// Version is the body of /v1/version.
type Version struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	Compose string `json:"compose"`
	API     string `json:"api"`
}

func (s *Server) getVersion(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, Version{Version: s.opts.Version, Go: runtime.Version(), Compose: lifecycle.ComposeVersion(), API: "v1"})
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
