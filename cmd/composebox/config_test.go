package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/composebox/composebox/cleanup/labels"
)

// runConfigCLI runs `composebox <args>` in-process like run does, registering the config verb
// if the root command does not have it yet.
func runConfigCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	g := &globals{stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
	root := newRootCmd(g)
	if c, _, err := root.Find([]string{"config"}); err != nil || c == root {
		cfg := newConfigCmd(g)
		wrapArgs(cfg)
		root.AddCommand(cfg)
	}
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	code := g.finish(t.Context(), root.ExecuteContext(t.Context()))
	return code, out.String(), errb.String()
}

// TestConfigTestdata runs `composebox config` over every scenario of testdata/projects, and
// over each file of the two scenarios made of malformed or forbidden configs.
func TestConfigTestdata(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "projects")
	want := map[string]string{ // directory -> "" (ok) or the error kind
		"dockerfile-only":   "",
		"multi-service":     "",
		"x-default":         "",
		"build-x-default":   "",
		"init-sidecar":      "",
		"bad":               "invalid_config",
		"policy-violations": "policy_violation",
		"suites":            "owned by TestConfigSuites",
		"compose-rules":     "owned by TestConfigComposeRules",
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		kind, ok := want[e.Name()]
		if !ok {
			t.Errorf("testdata/projects/%s: no expected outcome", e.Name())
			continue
		}
		if strings.HasPrefix(kind, "owned by") {
			continue
		}
		dir := filepath.Join(root, e.Name())
		paths := []string{dir}
		if kind != "" {
			files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
			paths = append(paths, files...)
		}
		for _, p := range paths {
			t.Run(strings.TrimPrefix(p, root+string(filepath.Separator)), func(t *testing.T) {
				checkConfig(t, p, kind)
			})
		}
	}
}

func checkConfig(t *testing.T, path, kind string) {
	t.Helper()
	code, out, errOut := runConfigCLI(t, "config", path, "--task", "My Task")
	if kind == "" {
		if code != exitOK {
			t.Fatalf("exit %d, stderr %s", code, errOut)
		}
		for _, w := range []string{"name: cbx-my-task-", labels.LabelManaged + ": \"true\"", labels.LabelTask + ": My Task", "init: true"} {
			if !strings.Contains(out, w) {
				t.Errorf("YAML does not contain %q:\n%s", w, out)
			}
		}
		if stale := "name: " + filepath.Base(path) + "_"; strings.Contains(out, stale) {
			t.Errorf("YAML still names a resource after the directory (%q): samples would share it", stale)
		}
		code, out, errOut = runConfigCLI(t, "config", path, "--json")
		var p struct {
			Name     string                    `json:"name"`
			Services map[string]map[string]any `json:"services"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &p) != nil || len(p.Services) == 0 {
			t.Fatalf("--json: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if task := filepath.Base(path); !strings.HasPrefix(p.Name, "cbx-"+task+"-") {
			t.Errorf("--json name = %q, want cbx-%s-<sample> from the directory name", p.Name, task)
		}
		return
	}
	if code != exitFailure || !strings.HasPrefix(errOut, "composebox: "+kind+": ") {
		t.Fatalf("exit %d, stderr %q; want %d and kind %s", code, errOut, exitFailure, kind)
	}
	code, out, _ = runConfigCLI(t, "--json", "config", path)
	var e struct {
		Error struct{ Kind, Message string } `json:"error"`
	}
	if code != exitFailure || json.Unmarshal([]byte(out), &e) != nil || e.Error.Kind != kind || e.Error.Message == "" {
		t.Fatalf("--json: exit %d, stdout %q; want the %s error as JSON", code, out, kind)
	}
}

func TestConfigUsage(t *testing.T) {
	code, _, errOut := runConfigCLI(t, "config", "a", "b")
	if code != exitUsage || !strings.HasPrefix(errOut, "composebox: usage: ") {
		t.Errorf("config a b: exit %d, stderr %q", code, errOut)
	}
}

// config says whether a warm pool can keep samples of the task: "pool" in the JSON, and a
// comment at the top of the YAML when it cannot, with the reason naming the variables.
func TestConfigPool(t *testing.T) {
	reason := "its files reference per-sample variables (SAMPLE_METADATA_DOCKER_IMAGE): each sample is loaded with its own values"
	for _, tc := range []struct {
		name string
		args []string
		want map[string]any
	}{
		{"metadata", []string{filepath.Join("..", "..", "testdata", "projects", "suites", "inspect-sample-metadata"), "--metadata", "docker_image=base"},
			map[string]any{"poolable": false, "reason": reason}},
		{"multi-service", []string{filepath.Join("..", "..", "testdata", "projects", "multi-service")}, map[string]any{"poolable": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runConfigCLI(t, append([]string{"config", "--json"}, tc.args...)...)
			var doc struct {
				Pool     map[string]any `json:"pool"`
				Services map[string]any `json:"services"`
			}
			if code != exitOK || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Services) == 0 {
				t.Fatalf("config --json: exit %d\n%s%s", code, out, errOut)
			}
			if !reflect.DeepEqual(doc.Pool, tc.want) {
				t.Errorf("pool = %v, want %v", doc.Pool, tc.want)
			}
			code, out, errOut = runConfigCLI(t, append([]string{"config"}, tc.args...)...)
			if code != exitOK {
				t.Fatalf("config: exit %d\n%s", code, errOut)
			}
			comment := "# warm pools: no: " + reason + "\n"
			if poolable := tc.want["poolable"] == true; poolable == strings.HasPrefix(out, comment) || (poolable && strings.Contains(out, "warm pools")) {
				t.Errorf("YAML of a task with poolable=%v starts:\n%.300s", poolable, out)
			}
		})
	}
}
