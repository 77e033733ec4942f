package compose

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestTaskNameOf(t *testing.T) {
	for dir, want := range map[string]string{
		"/suites/22-back-to-the-past/env": "22-back-to-the-past",
		"/ctf/network-tools/challenge":    "network-tools",
		"/ctf/chunky/dist":                "chunky",
		"/repo/intercode/docker":          "intercode",
		"/tasks/fix-perms/environment":    "fix-perms",
		"/x/My-Task/src/deploy":           "My-Task",
		"/tasks/web":                      "web",
		"/env":                            "task",
		"/":                               "task",
		"/bench/challenges/CVE-2024-0001": "CVE-2024-0001",
		"/bench/Environment":              "bench",
		"/a/b/c/env/":                     "c",
	} {
		if got := TaskNameOf(dir); got != want {
			t.Errorf("TaskNameOf(%q) = %q, want %q", dir, got, want)
		}
	}
}

func TestResolveLayouts(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"harbor/t1/task.toml":                          "[task]\nname = \"org/t1\"\n[environment]\ncpus = 1.5\nmemory = \"2G\"\n",
		"harbor/t1/environment/Dockerfile":             "FROM scratch\n",
		"harbor/t2/task.toml":                          "version = \"1.0\"\n[environment]\ndocker_image = \"img:1\"\nallow_internet = false\n",
		"harbor/t2/environment/":                       "",
		"harbor/bad/task.toml":                         "[task\n",
		"harbor/bad/environment/":                      "",
		"tb/hello/task.yaml":                           "instruction: hi\n",
		"tb/hello/docker-compose.yaml":                 "services:\n  client:\n    image: x\n",
		"tb/nocompose/task.yaml":                       "instruction: hi\n",
		"tb/nocompose/Dockerfile":                      "FROM scratch\n",
		"inspect/chal/compose.yaml":                    "services:\n  default:\n    image: x\n",
		"inspect/chal/challenge.json":                  "{}",
		"plain/compose.yaml":                           "services:\n  default:\n    image: x\n",
		"toml-without-env/task.toml":                   "",
		"toml-without-env/compose.yaml":                "services:\n  default:\n    image: x\n",
		"harbor/t1/environment/docker-compose.yaml":    "services:\n  main:\n    depends_on: [side]\n  side:\n    image: x\n",
		"harbor/t1/environment/ignored/compose.yaml.x": "",
		// Harbor environment directories without their task.toml, and look-alikes that are not.
		"alone/data-check/environment/Dockerfile":          "FROM scratch\n",
		"alone/data-check/environment/docker-compose.yaml": "services:\n  main:\n    environment: [DATA_URI]\n",
		"alone/anchored/Dockerfile":                        "FROM scratch\n",
		"alone/anchored/compose.yaml":                      "x-m: &m {environment: [A]}\nservices:\n  main:\n    <<: *m\n  side:\n    image: x\n",
		"alone/main-has-image/Dockerfile":                  "FROM scratch\n",
		"alone/main-has-image/docker-compose.yaml":         "services:\n  main:\n    image: x\n",
		"alone/main-builds/Dockerfile":                     "FROM scratch\n",
		"alone/main-builds/docker-compose.yaml":            "services:\n  main:\n    build: .\n",
		"alone/main-extends/Dockerfile":                    "FROM scratch\n",
		"alone/main-extends/docker-compose.yaml":           "services:\n  main:\n    extends: {file: base.yaml, service: m}\n",
		"alone/no-main/Dockerfile":                         "FROM scratch\n",
		"alone/no-main/docker-compose.yaml":                "services:\n  default:\n    depends_on: [x]\n",
		"alone/no-dockerfile/docker-compose.yaml":          "services:\n  main:\n    environment: [A]\n",
	})
	p := func(rel string) string { return filepath.Join(dir, rel) }
	tests := []struct {
		path, layout, task, def, reason, err string
		files                                int
	}{
		{path: "harbor/t1", layout: "harbor", task: "org/t1", def: "main", files: 1, reason: "main built from environment/Dockerfile, docker-compose.yaml merged on top"},
		{path: "harbor/t1/task.toml", layout: "harbor", task: "org/t1", def: "main", files: 1},
		{path: "harbor/t2", layout: "harbor", task: "t2", def: "main", reason: "main runs img:1"},
		{path: "harbor/bad", err: "task.toml"},
		{path: "tb/hello", layout: "terminal-bench", task: "hello", def: "client", files: 1},
		{path: "tb/hello/task.yaml", layout: "terminal-bench", task: "hello", def: "client", files: 1},
		{path: "tb/nocompose", layout: "", task: "nocompose"},
		{path: "tb/nocompose/task.yaml", err: "a Terminal-Bench task.yaml needs a docker-compose.yaml beside it"},
		{path: "inspect/chal", layout: "inspect", task: "chal", files: 1, reason: "challenge.json beside it"},
		{path: "plain", layout: "", task: "plain", files: 1},
		{path: "toml-without-env", layout: "", task: "toml-without-env", files: 1},
		// A Harbor task's environment/ given directly is its task.
		{path: "harbor/t1/environment", layout: "harbor", task: "org/t1", def: "main", files: 1, reason: "is a Harbor task (task.toml, environment/)"},
		{path: "harbor/t2/environment", layout: "harbor", task: "t2", def: "main", reason: "main runs img:1"},
		// On its own, main is built from the Dockerfile beside the overlay.
		{path: "alone/data-check/environment", layout: "harbor", task: "data-check", def: "main", files: 1,
			reason: "is a Harbor environment directory (a Dockerfile, and docker-compose.yaml adding to main without building it): main built from environment/Dockerfile, docker-compose.yaml merged on top"},
		{path: "alone/anchored", layout: "harbor", task: "anchored", def: "main", files: 1},
		{path: "alone/main-has-image", layout: "", task: "main-has-image", files: 1},
		{path: "alone/main-builds", layout: "", task: "main-builds", files: 1},
		{path: "alone/main-extends", layout: "", task: "main-extends", files: 1},
		{path: "alone/no-main", layout: "", task: "no-main", files: 1},
		{path: "alone/no-dockerfile", layout: "", task: "no-dockerfile", files: 1},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r, err := Resolve(p(tt.path), ResolveOptions{})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Resolve = %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Layout) != tt.layout || r.TaskName != tt.task || r.DefaultService != tt.def || len(r.Files) != tt.files {
				t.Errorf("Resolve = layout %q task %q default %q files %v; want %q %q %q %d files",
					r.Layout, r.TaskName, r.DefaultService, r.Files, tt.layout, tt.task, tt.def, tt.files)
			}
			if !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("reason %q lacks %q", r.Reason, tt.reason)
			}
		})
	}

	// Harbor's main: limits from task.toml, the image of docker_image, and an overlay that only
	// adds to main loads.
	r, _ := Resolve(p("harbor/t1"), ResolveOptions{})
	proj, err := Load(t.Context(), r, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	main := proj.Services["main"]
	if main.Build == nil || main.Build.Context != p("harbor/t1/environment") || main.Deploy == nil ||
		main.Deploy.Resources.Limits.NanoCPUs != 1.5 || main.Deploy.Resources.Limits.MemoryBytes != 2<<30 ||
		main.DependsOn["side"].Condition == "" || *main.Environment["TEST_DIR"] != "/tests" {
		t.Errorf("main = %+v", main)
	}
	if main.Build != nil && main.Build.Args[BaseImageEnv] == nil {
		t.Error("main's build lacks the base image build arg")
	}
	r, _ = Resolve(p("harbor/t2"), ResolveOptions{})
	if proj, err = Load(t.Context(), r, LoadOptions{}); err != nil || proj.Services["main"].Image != "img:1" || proj.Services["main"].Build != nil {
		t.Errorf("docker_image task: %v, %+v", err, proj)
	}
	// allow_internet = false: the task's policy cuts egress; t1 says nothing and keeps it.
	if !r.EgressOff || !strings.Contains(r.Reason, "no internet") {
		t.Errorf("allow_internet = false: EgressOff %t, reason %q", r.EgressOff, r.Reason)
	}
	if r, _ = Resolve(p("harbor/t1"), ResolveOptions{}); r.EgressOff {
		t.Error("a task without allow_internet lost its egress")
	}

	// An environment directory on its own loads as Harbor runs it: main built from the
	// Dockerfile, the overlay's additions on top, Harbor's variables set.
	r, _ = Resolve(p("alone/data-check/environment"), ResolveOptions{})
	proj, err = Load(t.Context(), r, LoadOptions{Environment: map[string]string{"DATA_URI": "s3://b"}})
	if err != nil {
		t.Fatal(err)
	}
	main = proj.Services["main"]
	if main.Build == nil || main.Build.Context != p("alone/data-check/environment") || main.Build.Args[BaseImageEnv] == nil ||
		main.Environment["DATA_URI"] == nil || *main.Environment["DATA_URI"] != "s3://b" || *main.Environment["TEST_DIR"] != "/tests" ||
		r.Env["CONTEXT_DIR"] != p("alone/data-check/environment") || main.Deploy != nil {
		t.Errorf("main = %+v, env %v", main, r.Env)
	}
}
