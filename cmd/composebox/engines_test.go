package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/internal/testutil/dockerd"
)

func TestEngineFlagsUsageErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "engines.yaml")
	if err := os.WriteFile(file, []byte("engines:\n  - name: a\n    endpoint: unix:///x\n    max_sample: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "nameless", "ls"}, "want NAME=ENDPOINT"},
		{[]string{"--engine", "a=http://x:1", "ls"}, "want unix://"},
		{[]string{"--engine", "a=unix:///x", "--engine", "a=unix:///y", "ls"}, "named twice"},
		{[]string{"--engines", file, "ls"}, "max_sample"},
		{[]string{"--engine", "a=unix:///x", "--backend", "kubernetes", "ls"}, "not with --backend kubernetes"},
	} {
		code, _, errOut := runCLI(t, tt.args...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

// TestEnginesEndToEnd runs the verbs over the host's engine and a private one: up names the
// engine of each sample, exec and ps find a project on whichever engine holds it, ls has an
// ENGINE column, and cleanup removes from both.
func TestEnginesEndToEnd(t *testing.T) {
	host := testutil.Docker(t)
	priv := testutil.PrivateDockerd(t, dockerd.Options{Prefix: "cbxec"})
	pc, err := priv.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	engines := filepath.Join(t.TempDir(), "engines.yaml")
	if err := os.WriteFile(engines, []byte("engines:\n  - name: host\n    endpoint: "+host.DaemonHost()+
		"\n  - name: priv\n    endpoint: "+priv.Endpoint()+"\n    subnet_pool: 10.223.0.0/16\n    labels: {role: test}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	task := uniqueTask("engines")
	global := []string{"--engines", engines, "--state-dir", t.TempDir(), "--progress", "none"}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, append(append([]string{}, global...), args...)...)
	}
	t.Cleanup(func() {
		var out, errb strings.Builder
		args := append(append([]string{}, global...), "cleanup", "--all", "--task", task)
		if code := run(context.Background(), args, strings.NewReader(""), &out, &errb); code != 0 {
			t.Errorf("cleanup: exit %d: %s%s", code, out.String(), errb.String())
		}
		for _, c := range []client.APIClient{host, pc} {
			n, err := testutil.Count(context.Background(), c, filters.Arg("label", labels.LabelTask+"="+task))
			if err != nil || n != 0 {
				t.Errorf("%d resources of task %s left on %s after cleanup (%v)", n, task, c.DaemonHost(), err)
			}
		}
	})
	on := map[string]string{}
	for range 2 {
		code, out, errOut := cli("up", "--json", "--task", task)
		if code != 0 {
			t.Fatalf("up: exit %d: %s%s", code, out, errOut)
		}
		var res struct{ Project, Engine string }
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Project == "" {
			t.Fatalf("up --json: %q %v", out, err)
		}
		if res.Engine != "host" && res.Engine != "priv" {
			t.Fatalf("up --json names engine %q", res.Engine)
		}
		on[res.Project] = res.Engine
	}
	for p, engine := range on {
		code, out, errOut := cli("exec", "-p", p, "--", "echo", "hello")
		if code != 0 || out != "hello\n" {
			t.Fatalf("exec in %s on %s: exit %d, %q %s", p, engine, code, out, errOut)
		}
		if code, out, errOut := cli("ps", "-p", p); code != 0 || !strings.Contains(out, "running") {
			t.Fatalf("ps of %s on %s: exit %d, %q %s", p, engine, code, out, errOut)
		}
	}
	code, out, errOut := cli("ls", "--json", "--task", task)
	if code != 0 {
		t.Fatalf("ls --json: exit %d: %s", code, errOut)
	}
	var listing struct {
		Projects []struct{ Name, Engine string }
	}
	if err := json.Unmarshal([]byte(out), &listing); err != nil || len(listing.Projects) != 2 {
		t.Fatalf("ls --json: %q %v", out, err)
	}
	for _, p := range listing.Projects {
		if on[p.Name] != p.Engine {
			t.Fatalf("ls --json says %s is on %q, up said %q", p.Name, p.Engine, on[p.Name])
		}
	}
	code, out, _ = cli("ls", "--task", task)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || !strings.HasPrefix(lines[0], "ENGINE ") || len(lines) != 3 {
		t.Fatalf("ls with two engines: exit %d\n%s", code, out)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if on[f[1]] != f[0] {
			t.Fatalf("ls row %q: engine %s, up said %s", l, f[0], on[f[1]])
		}
	}
}
