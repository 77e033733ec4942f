package api

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
)

// hostAttack is a task that asks for the host: its root and the docker socket bound, every
// capability, and a variable of the server's environment.
const hostAttack = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    cap_add: [SYS_ADMIN]
    environment:
      STOLEN: ${CBX_TEST_SERVER_SECRET:-none}
    volumes:
      - /:/host
      - /var/run/docker.sock:/var/run/docker.sock
`

// hostAttackRequest is hostAttack with a policy and pass_env that ask for all of it.
func hostAttackRequest(name string) TaskRequest {
	return TaskRequest{Name: name, ComposeYAML: hostAttack,
		Policy:  &PolicyRequest{Allow: []string{"docker-socket", "any-mount"}, AllowCapabilities: []string{"ALL"}},
		PassEnv: []string{"CBX_TEST_SERVER_SECRET"}}
}

// taskResources counts the containers, networks and volumes of a task, whatever their owner.
func taskResources(t *testing.T, task string) int {
	t.Helper()
	return testutil.Resources(t, testutil.Docker(t), labels.LabelTask+"="+task)
}

// A client asks, in its task request, for the docker socket, host paths from anywhere, every
// capability and a secret of the server's environment, with a file that binds / and the socket.
// The server's operator allowed none of it: the answer is policy_violation naming the serve
// flag for each, nothing is created and the secret is in no answer. A request within the
// ceiling still runs; with the serve flags given, the same request runs.
func TestAttackRequestBeyondCeiling(t *testing.T) {
	secret := "cbx-secret-" + newID("")
	t.Setenv("CBX_TEST_SERVER_SECRET", secret)

	ts := startServer(t, Options{})
	lease := ts.lease(t)
	hdr := map[string]string{leaseHeader: lease}
	name := uniqueName("ceiling")
	r := ts.do(t, "POST", "/v1/tasks", jsonBody(t, hostAttackRequest(name)), hdr)
	e := r.wantError(t, http.StatusUnprocessableEntity, "policy_violation")
	for _, flag := range []string{"composebox serve --allow docker-socket", "composebox serve --allow any-mount",
		"composebox serve --allow-cap ALL", "composebox serve --pass-env CBX_TEST_SERVER_SECRET"} {
		if !strings.Contains(e.Message, flag) {
			t.Errorf("the refusal does not name %q: %s", flag, e.Message)
		}
	}
	if strings.Contains(string(r.body), secret) {
		t.Fatalf("the refusal holds the server's secret: %s", r.body)
	}
	if n := taskResources(t, name); n != 0 {
		t.Fatalf("%d resources of the refused task exist", n)
	}
	var tasks struct{ Tasks []Task }
	ts.do(t, "GET", "/v1/tasks", nil, hdr).json(t, &tasks)
	if len(tasks.Tasks) != 0 {
		t.Fatalf("the refused task is listed: %+v", tasks.Tasks)
	}

	// Without the policy and pass_env, the file alone is refused by the compose policy, whose
	// opt-ins are said the server's way: the serve flag, then the request's policy.
	plain := hostAttackRequest(name)
	plain.Policy, plain.PassEnv = nil, nil
	r = ts.do(t, "POST", "/v1/tasks", jsonBody(t, plain), hdr)
	e = r.wantError(t, http.StatusUnprocessableEntity, "policy_violation")
	if want := `composebox serve --allow docker-socket, then "policy": {"allow": ["docker-socket"]} in the request`; !strings.Contains(e.Message, want) {
		t.Errorf("the compose policy's refusal does not say %q: %s", want, e.Message)
	}
	if strings.Contains(string(r.body), secret) {
		t.Fatalf("the refusal holds the server's secret: %s", r.body)
	}

	// Within the ceiling, a task runs.
	task := ts.task(t, lease, TaskRequest{Name: uniqueName("within"), ComposeYAML: keepAlive})
	ts.sample(t, lease, task.ID, SampleRequest{})

	// An operator who allows it all lets the same request through.
	open := compose.DefaultPolicy()
	for _, k := range []string{"docker-socket", "any-mount"} {
		if err := open.Allow(k); err != nil {
			t.Fatal(err)
		}
	}
	open.AllowCapabilities = []string{"ALL"}
	ts2 := startServer(t, Options{Ceiling: Ceiling{Policy: open, PassEnv: []string{"CBX_TEST_SERVER_SECRET"}}})
	lease2 := ts2.lease(t)
	allowed := ts2.task(t, lease2, hostAttackRequest(uniqueName("allowed")))
	sm := ts2.sample(t, lease2, allowed.ID, SampleRequest{})
	r = ts2.do(t, "POST", "/v1/samples/"+sm.Project+"/sandboxes/default/exec",
		jsonBody(t, ExecRequest{Cmd: []string{"sh", "-c", `echo "$STOLEN"; test -S /var/run/docker.sock && test -d /host/etc && echo host`}}),
		map[string]string{leaseHeader: lease2})
	var res ExecResult
	r.json(t, &res)
	if r.status != http.StatusOK || string(res.Stdout) != secret+"\nhost\n" {
		t.Fatalf("the allowed task: %d %s (stdout %q)", r.status, r.body, res.Stdout)
	}
}

// Opt-ins a ceiling allows are a request's only when it asks: a request that asks for less
// than the ceiling gets less, and one that asks for an opt-in beyond it is refused even when
// its others are allowed.
func TestFakeCeilingNarrows(t *testing.T) {
	ceiling := compose.DefaultPolicy()
	if err := ceiling.Allow("any-mount"); err != nil {
		t.Fatal(err)
	}
	ceiling.AllowCapabilities = []string{"SYS_PTRACE"}
	ceiling.Pids = 77
	c := Ceiling{Policy: ceiling}

	spec, err := TaskRequest{ComposeYAML: "x"}.spec(c)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Policy.AllowAnyMount || len(spec.Policy.AllowCapabilities) != 0 || spec.Policy.Pids != 77 {
		t.Fatalf("a request asking nothing got %+v, want the default policy with the ceiling's limits", *spec.Policy)
	}
	spec, err = TaskRequest{ComposeYAML: "x", Policy: &PolicyRequest{Allow: []string{"any-mount"}, AllowCapabilities: []string{"cap_sys_ptrace", "CHOWN"}}}.spec(c)
	if err != nil {
		t.Fatal(err)
	}
	if !spec.Policy.AllowAnyMount || strings.Join(spec.Policy.AllowCapabilities, ",") != "SYS_PTRACE,CHOWN" {
		t.Fatalf("a request within the ceiling got %+v", *spec.Policy)
	}
	_, err = TaskRequest{ComposeYAML: "x", Policy: &PolicyRequest{Allow: []string{"any-mount", "privileged"}, AllowCapabilities: []string{"SYS_ADMIN"}}}.spec(c)
	var pe *compose.PolicyError
	if !asPolicyError(err, &pe) || len(pe.Violations) != 2 ||
		pe.Violations[0].OptIn != "composebox serve --allow privileged" || pe.Violations[1].OptIn != "composebox serve --allow-cap SYS_ADMIN" {
		t.Fatalf("a request beyond the ceiling: %v", err)
	}
	if kind := errorBody(err).Kind; kind != "policy_violation" {
		t.Fatalf("kind %s, want policy_violation", kind)
	}

	// A mount root must lie within one of the ceiling's.
	dir := t.TempDir()
	c.Policy.AllowAnyMount = false
	c.Policy.AllowedMountRoots = []string{dir}
	if _, err := (TaskRequest{ComposeYAML: "x", Policy: &PolicyRequest{AllowedMountRoots: []string{filepath.Join(dir, "sub")}}}).spec(c); err != nil {
		t.Fatalf("a mount root within the ceiling's: %v", err)
	}
	_, err = TaskRequest{ComposeYAML: "x", Policy: &PolicyRequest{AllowedMountRoots: []string{"/srv"}}}.spec(c)
	if !asPolicyError(err, &pe) || !strings.Contains(pe.Error(), "composebox serve --allow-mount-root /srv") {
		t.Fatalf("a mount root beyond the ceiling: %v", err)
	}
}

func asPolicyError(err error, pe **compose.PolicyError) bool {
	return errors.As(err, pe)
}

// A client names, as its task's working_dir, a directory of keys outside the server's task
// roots, and binds ./ into its sample. The server refuses it (naming --task-root), creates
// nothing, and the key is in no answer. The same holds for a home's .ssh, the cluster's PKI
// directory, the server's state directory and a symlink from inside a task root to the keys.
// A working_dir within a task root still runs and binds its files.
func TestAttackWorkingDirOutsideTaskRoots(t *testing.T) {
	loot := t.TempDir()
	key := "-----BEGIN FAKE KEY----- " + newID("")
	if err := os.WriteFile(filepath.Join(loot, "id_ed25519"), []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	inside := filepath.Join(root, "task")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inside, "data.txt"), []byte("task data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(loot, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "keys", ".ssh"), 0o755); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(root, "state")
	const lootYAML = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["./:/loot"]
`
	for _, tc := range []struct {
		name    string
		ceiling Ceiling
		dir     string
		want    string // in the message
	}{
		{"no task root", Ceiling{}, loot, "composebox serve --task-root " + compose.ResolvePath(loot)},
		{"outside the task root", Ceiling{TaskRoots: []string{root}}, loot, "composebox serve --task-root " + compose.ResolvePath(loot)},
		{"a symlink out of the task root", Ceiling{TaskRoots: []string{root}}, filepath.Join(root, "link"), "outside the server's task roots"},
		{"a home's .ssh", Ceiling{TaskRoots: []string{root}}, "/root/.ssh", "keys or credentials (.ssh)"},
		{"an .ssh in the task root", Ceiling{TaskRoots: []string{root}}, filepath.Join(root, "keys", ".ssh"), "keys or credentials (.ssh)"},
		{"the cluster's keys", Ceiling{TaskRoots: []string{root}}, "/var/lib/composebox-k8s/pki", "keys or credentials (pki)"},
		{"the server's state", Ceiling{TaskRoots: []string{root}, Refused: []string{stateDir}}, root, "holds " + stateDir},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			ts := startServer(t, Options{Ceiling: tc.ceiling})
			lease := ts.lease(t)
			name := uniqueName("loot")
			r := ts.do(t, "POST", "/v1/tasks", jsonBody(t, TaskRequest{Name: name, ComposeYAML: lootYAML, WorkingDir: tc.dir}),
				map[string]string{leaseHeader: lease})
			e := r.wantError(t, http.StatusUnprocessableEntity, "policy_violation")
			if !strings.Contains(e.Message, tc.want) {
				t.Errorf("refusal %q does not say %q", e.Message, tc.want)
			}
			if strings.Contains(string(r.body), key) {
				t.Fatalf("the answer holds the key: %s", r.body)
			}
			if n := taskResources(t, name); n != 0 {
				t.Fatalf("%d resources of the refused task exist", n)
			}
		})
	}

	// Within the task root, the working_dir is the task directory and its files bind.
	ts := startServer(t, Options{Ceiling: Ceiling{TaskRoots: []string{root}}})
	lease := ts.lease(t)
	task := ts.task(t, lease, TaskRequest{Name: uniqueName("inside"), ComposeYAML: lootYAML, WorkingDir: inside})
	sm := ts.sample(t, lease, task.ID, SampleRequest{})
	r := ts.do(t, "GET", "/v1/samples/"+sm.Project+"/sandboxes/default/files?path=/loot/data.txt", nil, map[string]string{leaseHeader: lease})
	if r.status != http.StatusOK || string(r.body) != "task data\n" {
		t.Fatalf("a working_dir within the task root: %d %q", r.status, r.body)
	}
	// A compose file outside the task roots is refused too, once there are task roots.
	outside := filepath.Join(loot, "compose.yaml")
	if err := os.WriteFile(outside, []byte(lootYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	r = ts.do(t, "POST", "/v1/tasks", jsonBody(t, TaskRequest{Name: uniqueName("loot"), Path: outside}), map[string]string{leaseHeader: lease})
	if e := r.wantError(t, http.StatusUnprocessableEntity, "policy_violation"); !strings.Contains(e.Message, "composebox serve --task-root "+compose.ResolvePath(loot)) {
		t.Errorf("a path outside the task roots: %s", e.Message)
	}
}

// Two clients of one server follow /v1/events. Each sees its own tasks' and samples' events,
// never the other's; a request without a lease is refused, one with an unknown lease is
// not_found, and a stream ends with its lease.
func TestAttackEventsOfAnotherLease(t *testing.T) {
	ts := startServer(t, Options{})
	a, b := ts.lease(t), ts.lease(t)
	asA, asB := map[string]string{leaseHeader: a}, map[string]string{leaseHeader: b}
	ts.do(t, "GET", "/v1/events", nil, nil).wantError(t, http.StatusBadRequest, "invalid_config")
	ts.do(t, "GET", "/v1/events", nil, map[string]string{leaseHeader: "l-nope"}).wantError(t, http.StatusNotFound, "not_found")

	evA, evB := ts.subscribe(t, a), ts.subscribe(t, b)
	taskA := ts.task(t, a, TaskRequest{Name: uniqueName("eva"), ComposeYAML: keepAlive})
	smA := ts.sample(t, a, taskA.ID, SampleRequest{})
	if r := ts.do(t, "DELETE", "/v1/samples/"+smA.Project, nil, asA); r.status/100 != 2 {
		t.Fatalf("delete A's sample: %d %s", r.status, r.body)
	}
	taskB := ts.task(t, b, TaskRequest{Name: uniqueName("evb"), ComposeYAML: keepAlive})
	smB := ts.sample(t, b, taskB.ID, SampleRequest{})
	// A's events all came before B's sample was healthy: B's stream up to then holds none.
	seenB := evB.until(t, func(e Event) bool { return e.Kind == "sample_healthy" && e.Project == smB.Project })
	for _, e := range seenB {
		if e.Project == smA.Project || e.Task == taskA.Name {
			t.Fatalf("lease B saw lease A's event %+v", e)
		}
	}
	// A's stream sees its own sample removed, then a second sample of its own; nothing of B's
	// in between, though B's sample started before it.
	smA2 := ts.sample(t, a, taskA.ID, SampleRequest{})
	seenA := evA.until(t, func(e Event) bool { return e.Kind == "sample_healthy" && e.Project == smA2.Project })
	removed := false
	for _, e := range seenA {
		if e.Project == smB.Project || e.Task == taskB.Name {
			t.Fatalf("lease A saw lease B's event %+v", e)
		}
		removed = removed || (e.Kind == "sample_removed" && e.Project == smA.Project)
	}
	if !removed {
		t.Fatalf("lease A's stream missed its own sample_removed: %+v", seenA)
	}

	// Closing lease A ends its stream; B's goes on.
	if r := ts.do(t, "DELETE", "/v1/leases/"+a, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("close lease A: %d %s", r.status, r.body)
	}
	evA.ends(t)
	if r := ts.do(t, "DELETE", "/v1/samples/"+smB.Project, nil, asB); r.status/100 != 2 {
		t.Fatalf("delete B's sample: %d %s", r.status, r.body)
	}
	evB.until(t, func(e Event) bool { return e.Kind == "sample_removed" && e.Project == smB.Project })
}

// until reads events until one matches, and returns all it read.
func (es *eventStream) until(t *testing.T, match func(Event) bool) []Event {
	t.Helper()
	var seen []Event
	timeout := time.After(60 * time.Second)
	for {
		select {
		case e, ok := <-es.lines:
			if !ok {
				t.Fatalf("event stream ended; read %+v", seen)
			}
			seen = append(seen, e)
			if match(e) {
				return seen
			}
		case <-timeout:
			t.Fatalf("no matching event within 60s; read %+v", seen)
		}
	}
}

// ends waits for the stream to end, failing on an event of any task.
func (es *eventStream) ends(t *testing.T) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-es.lines:
			if !ok {
				return
			}
			if e.Type == "event" && e.Kind != "sample_removed" {
				t.Fatalf("event after the lease ended: %+v", e)
			}
		case <-timeout:
			t.Fatal("the stream of a closed lease did not end within 30s")
		}
	}
}
