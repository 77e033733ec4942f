package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

func suite(name string) string {
	return filepath.Join("..", "..", "testdata", "projects", "suites", name)
}

// TestConfigSuites: config takes what a runner passes (-f, --profile, --metadata, --default,
// --agent-image, --image), reads the suites' layouts, shows the adaptations, and answers bad
// input with the flag to use.
func TestConfigSuites(t *testing.T) {
	state := t.TempDir()
	t.Setenv("COMPOSEBOX_STATE_DIR", state)

	t.Run("adaptations as comments and in JSON", func(t *testing.T) {
		code, out, errOut := runConfigCLI(t, "config", suite("cybench-shared-net"))
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		head, body, _ := strings.Cut(out, "\nname: ")
		for _, w := range []string{"# Adapted so that samples of this project can run side by side:",
			`#   service "victim": container_name "victim" dropped; it is a network alias on network shared_net instead`,
			`#   service "victim": host port 1337 of container port 1337/tcp published on an ephemeral port of 127.0.0.1 instead`,
			"#   external network shared_net", "#   volume challenge_data: fixed name"} {
			if !strings.Contains(head, w) {
				t.Errorf("comments lack %q:\n%s", w, head)
			}
		}
		if strings.Contains(body, "container_name") || strings.Contains(body, "external: true") || strings.Contains(body, "published: \"1337\"") {
			t.Errorf("the YAML keeps what was adapted:\n%s", body)
		}
		code, out, _ = runConfigCLI(t, "--json", "config", suite("cybench-shared-net"))
		var doc struct {
			Name        string             `json:"name"`
			Adaptations []configAdaptation `json:"adaptations"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Adaptations) != 4 {
			t.Fatalf("--json: exit %d, %s", code, out)
		}
		kinds := map[string]bool{}
		for _, a := range doc.Adaptations {
			kinds[a.Kind] = a.Message != ""
		}
		for _, k := range []string{"container_name", "host_port", "external_network", "fixed_name"} {
			if !kinds[k] {
				t.Errorf("--json adaptations %+v lack %s", doc.Adaptations, k)
			}
		}
	})

	t.Run("no default suggests the flags", func(t *testing.T) {
		code, _, errOut := runConfigCLI(t, "config", suite("sekai-dist-no-default/chunky/dist"))
		if code != exitFailure || !strings.HasPrefix(errOut, "composebox: invalid_config: ") ||
			!strings.Contains(errOut, "--default SERVICE") || !strings.Contains(errOut, "--agent-image IMAGE") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
		code, out, errOut := runConfigCLI(t, "config", suite("sekai-dist-no-default/chunky/dist"), "--default", "blog")
		if code != exitOK || !strings.Contains(out, "x-composebox-default: blog") {
			t.Errorf("--default blog: exit %d, %s", code, errOut)
		}
		code, out, errOut = runConfigCLI(t, "config", suite("sekai-dist-no-default/chunky/dist"), "--agent-image", "agent:1")
		if code != exitOK || !strings.Contains(out, "image: agent:1") || !strings.Contains(out, "dev.composebox.task: chunky") {
			t.Errorf("--agent-image: exit %d, %s\n%s", code, errOut, out)
		}
	})

	t.Run("layouts", func(t *testing.T) {
		code, out, errOut := runConfigCLI(t, "config", suite("harbor-sidecar-overlay/mqtt-retained-shadow"), "--service-image", "main=mirror/main:1")
		if code != exitOK || !strings.Contains(out, "dev.composebox.task: cyber-bench/mqtt-retained-shadow") || !strings.Contains(out, "image: mirror/main:1") {
			t.Errorf("harbor: exit %d, %s\n%s", code, errOut, out)
		}
		code, out, errOut = runConfigCLI(t, "--json", "config", suite("tbench-client/broken-python-path"))
		var doc struct {
			Name     string `json:"name"`
			Services map[string]struct {
				Volumes []struct{ Source, Target string } `json:"volumes"`
			} `json:"services"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &doc) != nil {
			t.Fatalf("terminal-bench: exit %d, %s", code, errOut)
		}
		dir := orchestrator.SampleDir(state, doc.Name)
		if v := doc.Services["client"].Volumes; len(v) != 2 || v[0].Source != filepath.Join(dir, "logs") || v[1].Source != filepath.Join(dir, "agent-logs") {
			t.Errorf("terminal-bench client binds %+v, want the logs in %s", v, dir)
		}
	})

	t.Run("-f, --profile, --metadata and --image", func(t *testing.T) {
		dir := t.TempDir()
		for name, content := range map[string]string{
			"base.yml":       "services:\n  default:\n    image: ${SAMPLE_METADATA_IMAGE}\n  web:\n    build: ./web\n  extra:\n    image: busybox\n    profiles: [debug]\n",
			"override.yml":   "services:\n  default:\n    environment:\n      FROM_OVERRIDE: \"yes\"\n",
			"web/Dockerfile": "FROM scratch\n",
		} {
			p := filepath.Join(dir, name)
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		code, out, errOut := runConfigCLI(t, "config", "-f", filepath.Join(dir, "base.yml"), "-f", filepath.Join(dir, "override.yml"),
			"--profile", "debug", "--metadata", "image=meta:1", "--service-image", "web=prebuilt:2")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, w := range []string{"image: meta:1", "FROM_OVERRIDE: \"yes\"", "  extra:", "image: prebuilt:2"} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		if strings.Contains(out, "build:") {
			t.Errorf("web is still built under --image:\n%s", out)
		}
		for _, bad := range [][]string{{"--service-image", "web"}, {"--metadata", "novalue"}, {"--service-image", "=x"}} {
			code, _, errOut := runConfigCLI(t, append([]string{"config", filepath.Join(dir, "base.yml")}, bad...)...)
			if code != exitUsage || !strings.Contains(errOut, bad[0]) {
				t.Errorf("%v: exit %d, stderr %q; want a usage error naming the flag", bad, code, errOut)
			}
		}
		code, _, errOut = runConfigCLI(t, "config", filepath.Join(dir, "base.yml"), "--metadata", "image=x", "--service-image", "nope=y")
		if code != exitFailure || !strings.Contains(errOut, `image override for service "nope": no such service`) {
			t.Errorf("unknown service: exit %d, %q", code, errOut)
		}
	})
}

// configAdaptation is an adaptation as config --json prints it.
type configAdaptation struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func TestRunImageFlagForms(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--image", "busybox", "--image", "web=x", "--", "true"},
		{"run", "--image", "a", "--image", "b", "--", "true"},
		{"run", "--image", "busybox", "--default", "web", "--", "true"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "--") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, errOut)
		}
	}
}

// TestUpSuiteSamplesReportPortsAndDownRemovesTheirDirectory: `up --json` on a Cybench-shaped
// file reports the ephemeral port the fixed one became, and `down` removes the directory a
// Terminal-Bench sample bound its logs from.
func TestUpSuiteSamplesReportPortsAndDownRemovesTheirDirectory(t *testing.T) {
	c := testutil.Docker(t)
	state := t.TempDir()
	t.Setenv("COMPOSEBOX_STATE_DIR", state)
	base := testutil.BaseImage(t)

	up := upJSON(t, "--agent-image", base, "--service-image", "victim="+base, suite("cybench-shared-net"))
	var victim *upServiceJSON
	for i := range up.Services {
		if up.Services[i].Name == "victim" {
			victim = &up.Services[i]
		}
	}
	if victim == nil || len(victim.Ports) != 1 || victim.Ports[0].HostPort == 1337 || victim.Ports[0].HostPort == 0 || victim.Ports[0].HostIP != "127.0.0.1" {
		t.Fatalf("up --json services %+v: want the victim's port 1337 on an ephemeral host port", up.Services)
	}
	if code, out, _ := runCLI(t, "exec", "-p", up.Project, "--", "wget", "-qO-", "http://victim:1337/"); code != 0 || out != "ready\n" {
		t.Errorf("exec by the old container name: exit %d, %q", code, out)
	}
	code, out, _ := runCLI(t, "ls", "--json")
	var list lsResult
	_ = json.Unmarshal([]byte(out), &list)
	want := backend.PublishedPort{Service: "victim", ContainerPort: 1337, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: victim.Ports[0].HostPort}
	found := false
	for _, p := range list.Projects {
		found = found || (p.Name == up.Project && slices.Equal(p.Ports, []backend.PublishedPort{want}))
	}
	if code != 0 || !found {
		t.Errorf("ls --json (exit %d) does not show %s publishing %v:\n%s", code, up.Project, want, out)
	}
	if code, _, errOut := runCLI(t, "down", up.Project); code != 0 {
		t.Fatalf("down: exit %d, %s", code, errOut)
	}

	up = upJSON(t, "--service-image", "client="+base, suite("tbench-client/broken-python-path"))
	dir := orchestrator.SampleDir(state, up.Project)
	if code, _, _ := runCLI(t, "exec", "-p", up.Project, "--", "sh", "-c", "echo hi > /logs/x"); code != 0 {
		t.Errorf("exec: exit %d", code)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "logs", "x")); err != nil || string(b) != "hi\n" {
		t.Errorf("the client's /logs is not %s/logs: %q, %v", dir, b, err)
	}
	if code, _, errOut := runCLI(t, "down", up.Project); code != 0 {
		t.Fatalf("down: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("down left %s: %v", dir, err)
	}
	if n := testutil.Resources(t, c, "com.docker.compose.project="+up.Project); n != 0 {
		t.Errorf("%d resources left after down", n)
	}
}
