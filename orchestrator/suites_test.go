package orchestrator_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

func suiteProject(name string) string { return project(filepath.Join("suites", name)) }

// TestParallelSamplesOfACybenchFile starts four samples at once of a Cybench-shaped file whose
// victim has a container_name, a fixed host port, an external network and a volume with a fixed
// name, with the agent added beside it and its image replaced by a local one. Every sample comes
// up; each agent reaches its own victim by the old container name; no two samples share a
// network or the volume; each victim is published on a port of its own.
func TestParallelSamplesOfACybenchFile(t *testing.T) {
	o, rec := newOrchestrator(t)
	base := testutil.BaseImage(t)
	task := taskInit(t, o, orchestrator.TaskSpec{
		Path:           suiteProject("cybench-shared-net"),
		AgentImage:     base,
		ImageOverrides: map[string]string{"victim": base},
	})
	const n = 4
	samples := startSamples(t, task, n)

	c := dockerClient(t, o)
	ports := map[int]string{}
	networks := map[string]string{}
	volumes := map[string]string{}
	for _, s := range samples {
		agent, victim := s.Default(), mustSandbox(t, s, "victim")
		if agent.Service() != "default" {
			t.Errorf("%s: default sandbox is %s, want the agent", s.Project(), agent.Service())
		}
		// Each victim serves its own project's name; the agent fetches it by the old names.
		if err := victim.WriteFile(t.Context(), "/srv/whoami", []byte(s.Project())); err != nil {
			t.Fatal(err)
		}
		for _, host := range []string{"victim", "locktalk.chals.local"} {
			res, err := agent.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"wget", "-q", "-O", "-", "http://" + host + ":1337/whoami"}, Timeout: 30 * time.Second})
			if err != nil || res.ExitCode != 0 || res.StdoutText() != s.Project() {
				t.Errorf("%s: agent fetched %q from %s (exit %d, %v), want its own victim's %q", s.Project(), res.StdoutText(), host, res.ExitCode, err, s.Project())
			}
		}

		conn, err := victim.Connection(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(conn.Ports) != 1 || conn.Ports[0].ContainerPort != 1337 || conn.Ports[0].HostIP != "127.0.0.1" || conn.Ports[0].HostPort == 1337 {
			t.Errorf("%s: victim ports %+v, want 1337 on an ephemeral port of 127.0.0.1", s.Project(), conn.Ports)
		} else {
			hp := conn.Ports[0].HostPort
			if other, dup := ports[hp]; dup {
				t.Errorf("%s and %s share host port %d", s.Project(), other, hp)
			}
			ports[hp] = s.Project()
			if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/whoami", hp)); got != s.Project() {
				t.Errorf("%s: host port %d serves %q", s.Project(), hp, got)
			}
		}

		info, err := c.ContainerInspect(t.Context(), victim.ContainerID())
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(info.Name, "/") == "victim" {
			t.Errorf("%s: the victim kept its fixed container name", s.Project())
		}
		for name := range info.NetworkSettings.Networks {
			if other, dup := networks[name]; dup {
				t.Errorf("%s and %s share network %s", s.Project(), other, name)
			}
			networks[name] = s.Project()
			if !strings.HasPrefix(name, s.Project()+"_") {
				t.Errorf("%s: victim on network %s, not one of its own", s.Project(), name)
			}
		}
		for _, m := range info.Mounts {
			if m.Destination == "/srv" {
				if other, dup := volumes[m.Name]; dup {
					t.Errorf("%s and %s share volume %s", s.Project(), other, m.Name)
				}
				volumes[m.Name] = s.Project()
				if m.Name != s.Project()+"_locktalk_challenge_data" {
					t.Errorf("%s: victim's volume is %s", s.Project(), m.Name)
				}
			}
		}
	}
	if len(ports) != n || len(volumes) != n {
		t.Errorf("%d distinct host ports and %d volumes for %d samples", len(ports), len(volumes), n)
	}
	// container_name, the host port, the external network and the volume's name, per sample.
	if got := rec.count(orchestrator.EventAdapted); got != 4*n {
		t.Errorf("%d adapted events, want %d", got, 4*n)
	}
}

// TestHarborTaskStartsExecsAndCleansUp runs a Harbor task directory: main built from
// environment/Dockerfile (FROM the local base through the build arg composebox passes), the
// overlay's sidecar built and awaited, task.toml's name and limits applied.
func TestHarborTaskStartsExecsAndCleansUp(t *testing.T) {
	t.Parallel()
	o, _ := newOrchestrator(t)
	testutil.BaseImage(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Path: suiteProject("harbor-sidecar-overlay/mqtt-retained-shadow")})
	if task.Name() != "cyber-bench/mqtt-retained-shadow" || task.DefaultService() != "main" {
		t.Errorf("task %q, default %q: want Harbor's name and main", task.Name(), task.DefaultService())
	}
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	main := s.Default()
	res, err := main.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "nc mqtt-broker 1883 </dev/null; echo $TEST_DIR; pwd"}, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 || res.StdoutText() != "retained\n/tests\n/app\n" {
		t.Errorf("main: %q (exit %d, %v), want the sidecar's answer, TEST_DIR and the Dockerfile's workdir", res.StdoutText(), res.ExitCode, err)
	}
	info, err := dockerClient(t, o).ContainerInspect(t.Context(), main.ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	if info.HostConfig.Memory != 1024<<20 || info.HostConfig.NanoCPUs != 1e9 {
		t.Errorf("main limits: memory %d, nano cpus %d; want task.toml's 1024 MB and 1 CPU", info.HostConfig.Memory, info.HostConfig.NanoCPUs)
	}
	// task.toml says allow_internet = false: every network main is on is internal.
	for name := range info.NetworkSettings.Networks {
		n, err := dockerClient(t, o).NetworkInspect(t.Context(), name, network.InspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !n.Internal {
			t.Errorf("main is on network %s, which has a route out; task.toml says allow_internet = false", name)
		}
	}
	checkRemoved(t, o, s)
}

// TestTerminalBenchTaskStartsExecsAndCleansUp runs a Terminal-Bench task: composebox sets the
// T_BENCH_* variables itself (container and image names per sample, log paths in a directory of
// the sample's own), the client's image is replaced with --image and the server built from the
// local base; the prefixed container name of the server still resolves.
func TestTerminalBenchTaskStartsExecsAndCleansUp(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	o, _ := newOrchestrator(t, orchestrator.WithStateDir(state))
	base := testutil.BaseImage(t)
	task := taskInit(t, o, orchestrator.TaskSpec{
		Path:           suiteProject("tbench-multi-container/grpc-health-check"),
		ImageOverrides: map[string]string{"client": base},
	})
	if task.Name() != "grpc-health-check" || task.DefaultService() != "client" {
		t.Errorf("task %q, default %q: want the task id and client", task.Name(), task.DefaultService())
	}
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	client := s.Default()
	script := `nc server 9000 </dev/null && nc ` + s.Project() + `__server 9000 </dev/null && echo $TEST_DIR && echo from-client > /logs/session.log && echo agent > /agent-logs/agent.log`
	res, err := client.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", script}, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 || res.StdoutText() != "SERVING\nSERVING\n/tests\n" {
		t.Errorf("client: %q %q (exit %d, %v)", res.StdoutText(), res.StderrText(), res.ExitCode, err)
	}
	dir := orchestrator.SampleDir(state, s.Project())
	for file, want := range map[string]string{"logs/session.log": "from-client\n", "agent-logs/agent.log": "agent\n"} {
		if got, err := os.ReadFile(filepath.Join(dir, file)); err != nil || string(got) != want {
			t.Errorf("host %s = %q, %v; want %q", file, got, err, want)
		}
	}
	checkRemoved(t, o, s)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the sample's directory %s is still there after cleanup: %v", dir, err)
	}
}

// checkRemoved cleans s up and checks that nothing of its project is left.
func checkRemoved(t *testing.T, o *orchestrator.Orchestrator, s *orchestrator.Sample) {
	t.Helper()
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if n, err := testutil.Count(t.Context(), dockerClient(t, o), filters.Arg("label", labels.ComposeProjectLabel+"="+s.Project())); err != nil || n != 0 {
		t.Errorf("%d resources of %s left after cleanup (%v)", n, s.Project(), err)
	}
}

func mustSandbox(t *testing.T, s *orchestrator.Sample, service string) *orchestrator.Sandbox {
	t.Helper()
	sb, err := s.Sandbox(service)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
