package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A second client of the same server (lease B) tries everything on lease A's task and sample:
// each is not_found, lists show it nothing of A's, and A's sample still answers A afterwards.
func TestAttackOtherLeaseGetsNotFound(t *testing.T) {
	ts := startServer(t, Options{})
	a, b := ts.lease(t), ts.lease(t)
	asA, asB := map[string]string{leaseHeader: a}, map[string]string{leaseHeader: b}
	task := ts.task(t, a, TaskRequest{Name: uniqueName("own"), ComposeYAML: keepAlive})
	sm := ts.sample(t, a, task.ID, SampleRequest{})
	sample := "/v1/samples/" + sm.Project
	sb := sample + "/sandboxes/default"
	exec := func() io.Reader { return jsonBody(t, ExecRequest{Cmd: []string{"true"}}) }

	for _, rq := range []struct {
		method, path string
		body         func() io.Reader
	}{
		{"POST", sb + "/exec", exec},
		{"POST", sb + "/exec/stream", func() io.Reader { return strings.NewReader(`{"cmd":["true"]}` + "\n") }},
		{"GET", sb + "/files?path=/etc/hostname", nil},
		{"PUT", sb + "/files?path=/tmp/planted", func() io.Reader { return strings.NewReader("x") }},
		{"GET", sb + "/dirs?path=/tmp", nil},
		{"GET", sb + "/connection", nil},
		{"GET", sample + "/sandboxes", nil},
		{"GET", sample, nil},
		{"POST", sample + "/detach", nil},
		{"POST", sample + "/fork", func() io.Reader { return strings.NewReader(`{"n":1}`) }},
		{"POST", sample + "/snapshots", func() io.Reader { return strings.NewReader(`{"name":"b"}`) }},
		{"POST", sample + "/reset", func() io.Reader { return strings.NewReader(`{"name":"b"}`) }},
		{"GET", sample + "/egress", nil},
		{"PUT", sample + "/egress", func() io.Reader { return strings.NewReader(`{"allow":["b.test"]}`) }},
		{"GET", sb + "/logs", nil},
		{"DELETE", sample, nil},
		{"GET", "/v1/tasks/" + task.ID, nil},
		{"POST", "/v1/tasks/" + task.ID + "/samples", func() io.Reader { return strings.NewReader("{}") }},
		{"DELETE", "/v1/tasks/" + task.ID, nil},
		{"POST", "/v1/leases/" + a + "/heartbeat", nil},
		{"DELETE", "/v1/leases/" + a, nil},
	} {
		var body io.Reader
		if rq.body != nil {
			body = rq.body()
		}
		r := ts.do(t, rq.method, rq.path, body, asB)
		if r.status != http.StatusNotFound {
			t.Errorf("lease B: %s %s: %d %s, want 404 not_found", rq.method, rq.path, r.status, r.body)
		}
	}

	// Without a lease, a request on a sample is refused before anything is looked up.
	ts.do(t, "POST", sb+"/exec", exec(), nil).wantError(t, http.StatusBadRequest, "invalid_config")

	// Lists show B nothing of A's, not even its lease id.
	var samples struct{ Samples []Sample }
	ts.do(t, "GET", "/v1/samples", nil, asB).json(t, &samples)
	var tasks struct{ Tasks []Task }
	ts.do(t, "GET", "/v1/tasks", nil, asB).json(t, &tasks)
	if len(samples.Samples) != 0 || len(tasks.Tasks) != 0 {
		t.Errorf("lease B lists %d samples and %d tasks, want none", len(samples.Samples), len(tasks.Tasks))
	}

	// A's sample, task and lease are untouched: A still execs, lists and heartbeats.
	if r := ts.do(t, "POST", sb+"/exec", exec(), asA); r.status != http.StatusOK {
		t.Fatalf("lease A's exec after B's attempts: %d %s", r.status, r.body)
	}
	ts.do(t, "GET", "/v1/samples", nil, asA).json(t, &samples)
	if len(samples.Samples) != 1 || samples.Samples[0].Project != sm.Project || samples.Samples[0].Detached {
		t.Fatalf("lease A's samples: %+v", samples.Samples)
	}
	if r := ts.do(t, "POST", "/v1/leases/"+a+"/heartbeat", nil, asA); r.status != http.StatusOK {
		t.Fatalf("lease A's heartbeat: %d %s", r.status, r.body)
	}
	if r := ts.do(t, "GET", sb+"/files?path=/tmp/planted", nil, asA); r.status != http.StatusNotFound {
		t.Fatalf("lease B planted a file in A's sample: %d %s", r.status, r.body)
	}
}
