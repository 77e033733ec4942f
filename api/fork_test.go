package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestForkSnapshotResetOverHTTP forks a sample two ways, snapshots and resets it through the
// server; another lease can do none of it.
func TestForkSnapshotResetOverHTTP(t *testing.T) {
	ts := startServer(t, Options{})
	a, b := ts.lease(t), ts.lease(t)
	asA, asB := map[string]string{leaseHeader: a}, map[string]string{leaseHeader: b}
	task := ts.task(t, a, TaskRequest{Name: uniqueName("fork"), ComposeYAML: keepAlive})
	sm := ts.sample(t, a, task.ID, SampleRequest{})
	sample := "/v1/samples/" + sm.Project
	run := func(project, script string) string {
		t.Helper()
		var res ExecResult
		r := ts.do(t, "POST", "/v1/samples/"+project+"/sandboxes/default/exec", jsonBody(t, ExecRequest{Cmd: []string{"sh", "-c", script}}), asA)
		r.json(t, &res)
		if r.status != http.StatusOK || res.ExitCode != 0 {
			t.Fatalf("exec %s in %s: %d %s", script, project, r.status, r.body)
		}
		return string(res.Stdout)
	}
	run(sm.Project, "echo at-fork > /tmp/mark")

	// Another lease cannot fork, snapshot or reset it.
	for _, path := range []string{sample + "/fork", sample + "/snapshots", sample + "/reset"} {
		ts.do(t, "POST", path, strings.NewReader(`{"name":"x"}`), asB).wantError(t, http.StatusNotFound, "not_found")
	}
	ts.do(t, "POST", sample+"/fork", strings.NewReader(`{"n":0}`), asA).wantError(t, http.StatusBadRequest, "invalid_config")

	var fr ForkResult
	r := ts.do(t, "POST", sample+"/fork", strings.NewReader(`{"n":2}`), asA)
	r.json(t, &fr)
	if r.status != http.StatusCreated || fr.Source != sm.Project || len(fr.Forks) != 2 {
		t.Fatalf("fork: %d %s", r.status, r.body)
	}
	for _, f := range fr.Forks {
		if f.Lease != a || f.Task != task.ID || f.Project == sm.Project {
			t.Errorf("fork %+v: want a new sample of lease A's task", f)
		}
		if got := run(f.Project, "cat /tmp/mark"); got != "at-fork\n" {
			t.Errorf("fork %s: %q", f.Project, got)
		}
		// The fork is lease A's: B cannot see it.
		ts.do(t, "GET", "/v1/samples/"+f.Project, nil, asB).wantError(t, http.StatusNotFound, "not_found")
	}

	var sn Snapshot
	r = ts.do(t, "POST", sample+"/snapshots", strings.NewReader(`{"name":"s1"}`), asA)
	r.json(t, &sn)
	if r.status != http.StatusCreated || sn.Name != "s1" || sn.Project != sm.Project {
		t.Fatalf("snapshot: %d %s", r.status, r.body)
	}
	run(sm.Project, "echo later > /tmp/mark")
	var reset Sample
	r = ts.do(t, "POST", sample+"/reset", strings.NewReader(`{"name":"s1"}`), asA)
	r.json(t, &reset)
	if r.status != http.StatusOK || reset.Project != sm.Project {
		t.Fatalf("reset: %d %s", r.status, r.body)
	}
	if got := run(sm.Project, "cat /tmp/mark"); got != "at-fork\n" {
		t.Errorf("after reset: %q", got)
	}
	ts.do(t, "POST", sample+"/reset", strings.NewReader(`{"name":"nope"}`), asA).wantError(t, http.StatusNotFound, "not_found")
}
