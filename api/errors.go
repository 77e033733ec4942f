package api

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator"
)

// Kinds the server adds to the library's: a request without the right token, and a lease that
// already runs as many requests as it may.
const (
	KindUnauthorized = "unauthorized"
	KindBusy         = "busy"
)

// StatusByKind is the HTTP status of each error kind: one per kind, whatever the route.
var StatusByKind = map[string]int{
	"invalid_config":    http.StatusBadRequest,
	KindUnauthorized:    http.StatusUnauthorized,
	"permission_denied": http.StatusForbidden,
	"not_found":         http.StatusNotFound,
	"is_a_directory":    http.StatusConflict,
	"conflict":          http.StatusConflict,
	"output_limit":      http.StatusRequestEntityTooLarge,
	"policy_violation":  http.StatusUnprocessableEntity,
	"prerequisite":      http.StatusFailedDependency,
	KindBusy:            http.StatusTooManyRequests,
	"internal":          http.StatusInternalServerError,
	"unavailable":       http.StatusServiceUnavailable,
	"timeout":           http.StatusGatewayTimeout,
	"build_failed":      http.StatusUnprocessableEntity,
	KindUnsupported:     http.StatusNotImplemented,
}

// Error is the body of every failed request, and the error of a stream's error event.
type Error struct {
	Kind    string         `json:"kind"`
	Message string         `json:"message"`
	Detail  map[string]any `json:"detail"`
}

// serverError is a failure of the server's own, in a kind the library does not have.
type serverError struct {
	kind, msg string
	detail    map[string]any
}

// BusyRetryAfter is the wait a busy answer suggests before the same request is sent again
// (detail.retry_after_seconds, and the Retry-After header rounded up to whole seconds): a
// lease's requests free their slots as they finish, most of them within a fraction of a second.
const BusyRetryAfter = 100 * time.Millisecond

func (e *serverError) Error() string { return e.msg }

// errorBody turns err into the error body: its kind, its message, and for an exec that ran
// but did not complete, the partial result.
func errorBody(err error) Error {
	var se *serverError
	kind := orchestrator.ErrorKind(err)
	if errors.As(err, &se) {
		kind = se.kind
	} else if errors.Is(err, errors.ErrUnsupported) {
		kind = KindUnsupported
	}
	body := Error{Kind: kind, Message: err.Error()}
	if se != nil {
		body.Detail = se.detail
	}
	var ee *orchestrator.ExecError
	var be *orchestrator.BuildError
	switch {
	case errors.As(err, &ee):
		body.Detail = map[string]any{"result": execResultOf(ee.Result)}
	case errors.As(err, &be):
		body.Detail = map[string]any{"image": be.Image, "step": be.Step, "log": be.Log}
	}
	return body
}

func statusOf(kind string) int {
	if s, ok := StatusByKind[kind]; ok {
		return s
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, err error) {
	body := errorBody(err)
	if body.Kind == KindBusy {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(BusyRetryAfter.Seconds()))))
	}
	writeJSON(w, statusOf(body.Kind), body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func invalid(msg string) error  { return errdefs.New(errdefs.ErrInvalidConfig, msg) }
func notFound(msg string) error { return errdefs.New(errdefs.ErrNotFound, msg) }
