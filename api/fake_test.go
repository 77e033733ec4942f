package api

import (
	"net/http"
	"testing"

	"github.com/composebox/composebox/internal/fakebackend"
	"github.com/composebox/composebox/orchestrator"
)

// The tests named TestFake* serve an orchestrator on the in-memory backend: no engine, quick,
// and under -race in `make test`.

const fakeTask = `
services:
  default:
    image: fake/app:1
`

func startFakeServer(t *testing.T) (*testServer, *fakebackend.Backend) {
	t.Helper()
	f := fakebackend.New()
	f.AddImage("fake/app:1", nil)
	ts := startServerWith(t, Options{}, orchestrator.WithBackend(f))
	t.Cleanup(func() {
		if left := f.Projects(); len(left) > 0 {
			t.Errorf("projects left behind: %v", left)
		}
	})
	return ts, f
}

func TestFakeServerSampleExecFilesAndDelete(t *testing.T) {
	ts, f := startFakeServer(t)
	lease := ts.lease(t)
	hdr := map[string]string{leaseHeader: lease}
	task := ts.task(t, lease, TaskRequest{Name: "fake", ComposeYAML: fakeTask})
	sm := ts.sample(t, lease, task.ID, SampleRequest{})
	sb := "/v1/samples/" + sm.Project + "/sandboxes/default"

	r := ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"echo", "hello"}}), hdr)
	var res ExecResult
	r.json(t, &res)
	if r.status != http.StatusOK || res.ExitCode != 0 || string(res.Stdout) != "hello\n" {
		t.Fatalf("exec: %d %s", r.status, r.body)
	}
	r = ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"sh", "-c", "exit 7"}}), hdr)
	r.json(t, &res)
	if r.status != http.StatusOK || res.ExitCode != 7 {
		t.Fatalf("exit 7 is a result: %d %s", r.status, r.body)
	}
	ts.do(t, "POST", "/v1/samples/"+sm.Project+"/sandboxes/nope/exec", jsonBody(t, ExecRequest{Cmd: []string{"true"}}), hdr).
		wantError(t, http.StatusNotFound, "not_found")

	// Another lease cannot see the sample.
	other := ts.lease(t)
	ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"true"}}), map[string]string{leaseHeader: other}).
		wantError(t, http.StatusNotFound, "not_found")

	// A lost engine is 503 unavailable, and the sample can be removed once it is back.
	f.SetDown(true)
	ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"true"}}), hdr).
		wantError(t, http.StatusServiceUnavailable, "unavailable")
	f.SetDown(false)

	r = ts.do(t, "DELETE", "/v1/samples/"+sm.Project, nil, hdr)
	if r.status/100 != 2 {
		t.Fatalf("delete sample: %d %s", r.status, r.body)
	}
	if left := f.Projects(); len(left) != 0 {
		t.Fatalf("left after delete: %v", left)
	}
}
