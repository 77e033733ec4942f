package main

import (
	"net/http"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/api"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// `composebox serve --backend kubernetes`, as the documented service account, serves the API
// from the cluster: a task's samples made over HTTP are namespaces of the task, exec runs in
// their pods, /v1/doctor reports the cluster and its registry (not the local engine), and
// deleting a sample, then the task with its other sample, leaves no namespace of the task; the
// server then stops cleanly.
func TestKubernetesServe(t *testing.T) {
	c := newOnCluster(t)
	task := uniqueTask("k8sserve")
	t.Cleanup(func() {
		_, _, _ = runCLI(t, append(slices.Clone(c.flags), "cleanup", "--all", "--task", task)...)
	})
	srv := serveCLI(t, c.flags)
	// namespaces are the cluster's namespaces of the task, those being deleted included.
	namespaces := func() []string {
		t.Helper()
		list, err := c.admin.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{LabelSelector: labels.ManagedFilter + "," + labels.LabelTask + "=" + task})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		slices.Sort(names)
		return names
	}

	srv.openLease()
	var tk api.Task
	srv.call("POST", "/v1/tasks", api.TaskRequest{Name: task, ComposeYAML: "services:\n  default:\n    image: ${COMPOSEBOX_BASE_IMAGE}\n    command: [tail, -f, /dev/null]\n"},
		http.StatusCreated, &tk)
	var kept, deleted api.Sample
	srv.call("POST", "/v1/tasks/"+tk.ID+"/samples", api.SampleRequest{}, http.StatusCreated, &deleted)
	srv.call("POST", "/v1/tasks/"+tk.ID+"/samples", api.SampleRequest{}, http.StatusCreated, &kept)
	if want := []string{deleted.Project, kept.Project}; !slices.Equal(namespaces(), slices.Sorted(slices.Values(want))) {
		t.Fatalf("the task's namespaces: %v, want its samples' %v", namespaces(), want)
	}
	// A sandbox is a pod of the sample's namespace.
	if sb := deleted.Sandboxes; len(sb) != 1 || sb[0].Container != deleted.Project+"/default" {
		t.Fatalf("sandboxes %+v, want the pod %s/default", sb, deleted.Project)
	}

	var res api.ExecResult
	srv.call("POST", "/v1/samples/"+deleted.Project+"/sandboxes/default/exec",
		api.ExecRequest{Cmd: []string{"sh", "-c", "cat; echo err >&2; exit 3"}, Input: []byte("in the pod\n")}, http.StatusOK, &res)
	if res.ExitCode != 3 || string(res.Stdout) != "in the pod\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("exec: %+v", res)
	}

	var rep backend.Report
	srv.call("GET", "/v1/doctor", nil, http.StatusOK, &rep)
	status := map[string]backend.Status{}
	for _, ch := range rep.Checks {
		status[ch.Name] = ch.Status
	}
	if !rep.OK || status["kubernetes"] != backend.Pass || status["registry"] != backend.Pass {
		t.Fatalf("doctor: %+v, want the cluster and its registry passing", rep)
	}
	if _, ok := status["daemon"]; ok {
		t.Fatalf("doctor checked the local engine, not the cluster the server runs on: %+v", rep)
	}

	srv.call("DELETE", "/v1/samples/"+deleted.Project, nil, http.StatusNoContent, nil)
	c.gone(t, deleted.Project)
	if got := namespaces(); !slices.Equal(got, []string{kept.Project}) {
		t.Fatalf("after deleting sample %s: the task's namespaces %v, want %s's only", deleted.Project, got, kept.Project)
	}
	srv.call("DELETE", "/v1/tasks/"+tk.ID, nil, http.StatusNoContent, nil)
	if got := namespaces(); len(got) != 0 {
		t.Fatalf("after deleting the task: namespaces %v remain", got)
	}
	if code := srv.shutdown(); code != exitOK {
		t.Fatalf("serve: exit %d\n%s", code, srv.stderr.String())
	}
}
