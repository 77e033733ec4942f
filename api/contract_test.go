package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator"
)

// openAPIDoc is the part of the document the contract checks.
type openAPIDoc struct {
	Info struct {
		Version string `json:"version"`
	} `json:"info"`
	Paths       map[string]map[string]json.RawMessage `json:"paths"`
	ErrorStatus map[string]int                        `json:"x-error-status"`
	Components  struct {
		Schemas map[string]struct {
			Required   []string `json:"required"`
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadDoc(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

// TestRoutesMatchOpenAPI fails when a route is registered but not documented, or documented but
// not registered.
func TestRoutesMatchOpenAPI(t *testing.T) {
	doc := loadDoc(t)
	var documented, registered []string
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	for _, rt := range routeTable {
		registered = append(registered, rt.Method+" "+rt.Path)
	}
	slices.Sort(documented)
	slices.Sort(registered)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("openapi.json documents %s, which is not a route", d)
		}
	}
	if len(registered) != len(slices.Compact(slices.Clone(registered))) {
		t.Errorf("a route is registered twice: %v", registered)
	}
}

// TestErrorStatusMatchesOpenAPI fails when the status table and the document disagree, or
// when a kind of the library has no status.
func TestErrorStatusMatchesOpenAPI(t *testing.T) {
	doc := loadDoc(t)
	for kind, status := range StatusByKind {
		if doc.ErrorStatus[kind] != status {
			t.Errorf("kind %s: status %d, openapi.json says %d", kind, status, doc.ErrorStatus[kind])
		}
	}
	for kind := range doc.ErrorStatus {
		if _, ok := StatusByKind[kind]; !ok {
			t.Errorf("openapi.json maps kind %s, which the server does not", kind)
		}
	}
	enum := doc.Components.Schemas["Error"].Properties["kind"].Enum
	for kind := range StatusByKind {
		if !slices.Contains(enum, kind) {
			t.Errorf("kind %s is missing from the Error schema's enum", kind)
		}
	}
	for _, cat := range []error{errdefs.ErrInvalidConfig, errdefs.ErrPolicyViolation, errdefs.ErrPrerequisite,
		errdefs.ErrNotFound, errdefs.ErrIsDirectory, errdefs.ErrPermission, errdefs.ErrTimeout,
		errdefs.ErrOutputLimit, errdefs.ErrUnavailable, errdefs.ErrConflict, errdefs.ErrBuildFailed, errors.New("boom")} {
		kind := orchestrator.ErrorKind(cat)
		if _, ok := StatusByKind[kind]; !ok {
			t.Errorf("library kind %s has no HTTP status", kind)
		}
	}
	if got := errorBody(&orchestrator.ExecError{Result: orchestrator.ExecResult{ExitCode: 137, Stdout: []byte{0xff}}, Err: errdefs.ErrTimeout}); got.Kind != "timeout" || got.Detail["result"].(ExecResult).Stdout[0] != 0xff || statusOf(got.Kind) != http.StatusGatewayTimeout {
		t.Errorf("exec timeout body = %+v", got)
	}
	build := fmt.Errorf("task init: %w", &orchestrator.BuildError{Image: "cbx-t-web:1", Step: "Step 2/3 : RUN make", Message: "returned a non-zero code: 2", Log: "make: *** no rule"})
	if got := errorBody(build); got.Kind != "build_failed" || got.Detail["step"] != "Step 2/3 : RUN make" || got.Detail["log"] != "make: *** no rule" ||
		got.Detail["image"] != "cbx-t-web:1" || statusOf(got.Kind) != http.StatusUnprocessableEntity {
		t.Errorf("build failure body = %+v", got)
	}
}

// TestVersionMatchesOpenAPI fails when /v1/version's body and its schema disagree, or when the
// document's version does not name the API version and revision the server reports (so that a
// revision raised in meta.go is documented too).
func TestVersionMatchesOpenAPI(t *testing.T) {
	doc := loadDoc(t)
	if want := fmt.Sprintf("%s revision %d", APIVersion, APIRevision); doc.Info.Version != want {
		t.Errorf("openapi.json info.version = %q, want %q", doc.Info.Version, want)
	}
	var fields []string
	typ := reflect.TypeOf(Version{})
	for i := range typ.NumField() {
		fields = append(fields, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
	}
	schema := doc.Components.Schemas["Version"]
	var documented []string
	for name := range schema.Properties {
		documented = append(documented, name)
	}
	slices.Sort(fields)
	slices.Sort(documented)
	required := slices.Sorted(slices.Values(schema.Required))
	if !slices.Equal(fields, documented) || !slices.Equal(fields, required) {
		t.Errorf("Version fields %v; openapi.json properties %v, required %v", fields, documented, required)
	}
}
