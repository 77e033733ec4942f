package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// route is one operation of the API. The table is the one place routes are registered, and the
// OpenAPI document must list exactly these (a test checks it).
type route struct {
	Method, Path string
	handle       func(*Server, http.ResponseWriter, *http.Request) error
}

var routeTable = []route{
	{"GET", "/v1/version", (*Server).getVersion},
	{"GET", "/v1/doctor", (*Server).getDoctor},
	{"GET", "/v1/openapi.json", (*Server).getOpenAPI},
	{"POST", "/v1/leases", (*Server).createLease},
	{"POST", "/v1/leases/{lease}/heartbeat", (*Server).heartbeatLease},
	{"DELETE", "/v1/leases/{lease}", (*Server).deleteLease},
	{"POST", "/v1/tasks", (*Server).createTask},
	{"GET", "/v1/tasks", (*Server).listTasks},
	{"GET", "/v1/tasks/{task}", (*Server).getTask},
	{"DELETE", "/v1/tasks/{task}", (*Server).deleteTask},
	{"POST", "/v1/tasks/{task}/samples", (*Server).createSample},
	{"GET", "/v1/samples", (*Server).listSamples},
	{"GET", "/v1/samples/{project}", (*Server).getSample},
	{"DELETE", "/v1/samples/{project}", (*Server).deleteSample},
	{"POST", "/v1/samples/{project}/detach", (*Server).detachSample},
	{"POST", "/v1/samples/{project}/fork", (*Server).forkSample},
	{"POST", "/v1/samples/{project}/snapshots", (*Server).snapshotSample},
	{"POST", "/v1/samples/{project}/reset", (*Server).resetSample},
	{"GET", "/v1/samples/{project}/egress", (*Server).getEgress},
	{"PUT", "/v1/samples/{project}/egress", (*Server).setEgress},
	{"GET", "/v1/samples/{project}/sandboxes", (*Server).listSandboxes},
	{"POST", "/v1/samples/{project}/sandboxes/{service}/exec", (*Server).exec},
	{"POST", "/v1/samples/{project}/sandboxes/{service}/exec/stream", (*Server).execStream},
	{"POST", "/v1/samples/{project}/sandboxes/{service}/exec/tty", (*Server).execTTY},
	{"GET", "/v1/samples/{project}/sandboxes/{service}/files", (*Server).readFile},
	{"PUT", "/v1/samples/{project}/sandboxes/{service}/files", (*Server).writeFile},
	{"GET", "/v1/samples/{project}/sandboxes/{service}/dirs", (*Server).readDir},
	{"PUT", "/v1/samples/{project}/sandboxes/{service}/dirs", (*Server).writeDir},
	{"GET", "/v1/samples/{project}/sandboxes/{service}/connection", (*Server).getConnection},
	{"GET", "/v1/samples/{project}/sandboxes/{service}/logs", (*Server).getLogs},
	{"GET", "/v1/events", (*Server).streamEvents},
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range routeTable {
		h := rt.handle
		mux.HandleFunc(rt.Method+" "+rt.Path, func(w http.ResponseWriter, r *http.Request) {
			if err := h(s, w, r); err != nil {
				writeError(w, err)
			}
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound(fmt.Sprintf("%s %s: no such route (see /v1/openapi.json)", r.Method, r.URL.Path)))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, &serverError{kind: KindUnauthorized, msg: r.Method + " " + r.URL.Path + ": missing or wrong bearer token (see the server's token file)"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// decodeJSON reads a JSON body of at most max bytes into v. An empty body leaves v as it is
// when optional.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, max int64, optional bool) error {
	op := r.Method + " " + r.URL.Path
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.Is(err, io.EOF) && optional:
			return nil
		case errors.Is(err, io.EOF):
			return invalid(op + ": request body is empty, want a JSON object")
		case errors.As(err, &mbe):
			return invalid(fmt.Sprintf("%s: request body exceeds %d bytes", op, mbe.Limit))
		default:
			return invalid(fmt.Sprintf("%s: request body: %v", op, err))
		}
	}
	if dec.More() {
		return invalid(op + ": request body holds more than one JSON value")
	}
	return nil
}

// leaseHeader is the header naming the caller's lease. What a lease creates (tasks, samples)
// belongs to it: every request on a task or a sample names the lease that created it, and a
// request naming another lease is told the task or sample does not exist, so that one client
// of a shared server can neither act on nor learn of another's.
const leaseHeader = "X-Composebox-Lease"

func leaseOf(r *http.Request) (string, error) {
	id := r.Header.Get(leaseHeader)
	if id == "" {
		return "", invalid(r.Method + " " + r.URL.Path + ": the " + leaseHeader + " header is required (open a lease with POST /v1/leases)")
	}
	return id, nil
}
