package compose

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests take the attacker's side: a compose file written to get at the host. Each writes
// the file that tries to get out and asserts that it cannot.

const marker = "MARKER-read-from-outside-the-task"

// outsideTree is a directory outside any task root holding files a task must not reach.
func outsideTree(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	writeFiles(t, out, map[string]string{
		"leak.env":   "LEAK=" + marker + "\n",
		"labels":     "leak=" + marker + "\n",
		"base.yaml":  "services:\n  base:\n    image: busybox\n    environment: {LEAK: " + marker + "}\n",
		"other.yaml": "services:\n  other:\n    image: busybox\n    environment: {LEAK: " + marker + "}\n",
		".env":       "LEAK=" + marker + "\n",
		"Dockerfile": "FROM scratch\n",
		"sub/":       "",
	})
	return out
}

// refused loads a task and asserts it is refused as a policy violation by the host-path or
// docker-socket rule, without the marker anywhere in what came back.
func refused(t *testing.T, dir string, opts LoadOptions) error {
	t.Helper()
	p, err := loadDir(t, dir, opts)
	if err == nil {
		b, _ := p.MarshalYAML()
		t.Fatalf("loaded:\n%s", b)
	}
	if !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("err = %v, want a policy violation", err)
	}
	vs := problemsOf(t, err)
	for _, v := range vs {
		if v.Rule != "host-path" && v.Rule != "docker-socket" && v.Rule != "variables" {
			t.Errorf("unexpected problem %v", v)
		}
	}
	if strings.Contains(err.Error(), marker) {
		t.Errorf("the error carries content read from outside: %v", err)
	}
	return err
}

func TestAttackBindThroughSymlinkToRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/", filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../..", filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	for _, bind := range []string{"./escape:/host", "./escape/etc:/e", "./up/etc/shadow:/s", "./escape/new/dir:/n"} {
		writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n    volumes: [\"" + bind + "\"]\n"})
		err := refused(t, dir, LoadOptions{})
		if !strings.Contains(err.Error(), "resolves to /") && !strings.Contains(err.Error(), "holding the docker socket") {
			t.Errorf("%s: %v, want the resolved path named", bind, err)
		}
	}
}

func TestAttackDotDot(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "task")
	writeFiles(t, root, map[string]string{"a/b/task/": "", "a/Dockerfile": "FROM scratch\n", "a/b/x.env": "X=" + marker + "\n"})
	for name, svc := range map[string]string{
		"build context":    "    build: {context: ../.., dockerfile: Dockerfile}\n",
		"dockerfile":       "    build: {context: ., dockerfile: ../../Dockerfile}\n",
		"bind":             "    image: busybox\n    volumes: [\"../../../../../../../../../etc:/etc\"]\n",
		"env file":         "    image: busybox\n    env_file: [../x.env]\n",
		"long bind":        "    image: busybox\n    volumes: [{type: bind, source: ./x/../../.., target: /x}]\n",
		"additional ctx":   "    build: {context: ., dockerfile_inline: \"FROM scratch\", additional_contexts: {up: ../..}}\n",
		"secret ../":       "    image: busybox\n    secrets: [s]\nsecrets:\n  s: {file: ../x.env}\n",
		"watch path ../..": "    image: busybox\n    develop: {watch: [{path: ../.., action: rebuild}]}\n",
	} {
		t.Run(name, func(t *testing.T) {
			writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n" + svc})
			refused(t, dir, LoadOptions{})
		})
	}
}

func TestAttackEnvFiles(t *testing.T) {
	out := outsideTree(t)
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(out, "leak.env"), filepath.Join(dir, "innocent.env")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, filepath.Join(dir, "envs")); err != nil {
		t.Fatal(err)
	}
	for name, envFile := range map[string]string{
		"/etc/shadow":        "/etc/shadow",
		"/etc/passwd long":   "[{path: /etc/passwd, required: false}]",
		"symlink out":        "innocent.env",
		"through a dir link": "envs/leak.env",
		"home":               "~/.bash_history",
		"absolute outside":   filepath.Join(out, "leak.env"),
		"interpolated path":  "${OUT}/leak.env",
	} {
		t.Run(name, func(t *testing.T) {
			writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n    env_file: " + envFile + "\n"})
			refused(t, dir, LoadOptions{Environment: map[string]string{"OUT": out}})
		})
	}
	// A .env that is a symlink out of the task directory is not read either.
	d2 := t.TempDir()
	os.Symlink(filepath.Join(out, ".env"), filepath.Join(d2, ".env"))
	writeFiles(t, d2, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n    environment: {X: \"${LEAK:-none}\"}\n"})
	err := refused(t, d2, LoadOptions{})
	if vs := problemsOf(t, err); len(vs) != 1 || vs[0].Field != ".env" {
		t.Errorf(".env symlink: %v", err)
	}
}

func TestAttackExtendsAndInclude(t *testing.T) {
	out := outsideTree(t)
	home := t.TempDir()
	writeFiles(t, home, map[string]string{"base.yaml": "services:\n  base:\n    image: busybox\n    environment: {LEAK: " + marker + "}\n"})
	t.Setenv("HOME", home)
	dir := filepath.Join(t.TempDir(), "leaky")
	writeFiles(t, dir, map[string]string{"x/": ""})
	// compose-go interpolates ${COMPOSE_PROJECT_NAME} in a path with the directory's name.
	writeFiles(t, out, map[string]string{"leaky.yaml": "services:\n  base:\n    image: busybox\n    environment: {LEAK: " + marker + "}\n"})
	os.Symlink(filepath.Join(out, "base.yaml"), filepath.Join(dir, "base.yaml"))
	os.Symlink(out, filepath.Join(dir, "lib"))
	for name, yml := range map[string]string{
		"extends absolute":         "services:\n  default:\n    extends: {file: " + filepath.Join(out, "base.yaml") + ", service: base}\n",
		"extends symlink":          "services:\n  default:\n    extends: {file: base.yaml, service: base}\n",
		"extends dir symlink":      "services:\n  default:\n    extends: {file: lib/base.yaml, service: base}\n",
		"extends ../":              "services:\n  default:\n    extends: {file: " + rel(dir, out) + "/base.yaml, service: base}\n",
		"extends home":             "services:\n  default:\n    extends: {file: ~/base.yaml, service: base}\n",
		"extends in a merge":       "x-e: &e\n  extends: {file: " + filepath.Join(out, "base.yaml") + ", service: base}\nservices:\n  default:\n    <<: *e\n",
		"services in a merge":      "x-s: &s\n  default:\n    extends: {file: " + filepath.Join(out, "base.yaml") + ", service: base}\nservices:\n  <<: *s\n",
		"include absolute":         "include: [" + filepath.Join(out, "other.yaml") + "]\nservices:\n  default: {image: busybox}\n",
		"include long":             "include:\n  - path: lib/other.yaml\nservices:\n  default: {image: busybox}\n",
		"include project dir":      "include:\n  - path: inc.yaml\n    project_directory: " + out + "\nservices:\n  default: {image: busybox}\n",
		"include env_file":         "include:\n  - path: inc.yaml\n    env_file: " + filepath.Join(out, "leak.env") + "\nservices:\n  default: {image: busybox}\n",
		"label_file":               "services:\n  default:\n    image: busybox\n    label_file: " + filepath.Join(out, "labels") + "\n",
		"label_file in merge":      "x-l: &l\n  label_file: [" + filepath.Join(out, "labels") + "]\nservices:\n  default:\n    <<: *l\n    image: busybox\n",
		"extends as an alias key":  "x-k: &k extends\nservices:\n  default:\n    *k : {file: " + filepath.Join(out, "base.yaml") + ", service: base}\n",
		"project name in the path": "services:\n  default:\n    extends: {file: \"" + filepath.Join(out, "${COMPOSE_PROJECT_NAME}.yaml") + "\", service: base}\n",
	} {
		t.Run(name, func(t *testing.T) {
			writeFiles(t, dir, map[string]string{"compose.yaml": yml, "inc.yaml": "services:\n  inc: {image: busybox}\n"})
			refused(t, dir, LoadOptions{})
		})
	}
}

// A file that extends or includes a FIFO outside the task directory: were it opened at all,
// the load would block, since nothing writes to it.
func TestAttackOutsideFileNeverOpened(t *testing.T) {
	out := t.TempDir()
	fifo := filepath.Join(out, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	dir := t.TempDir()
	for _, yml := range []string{
		"services:\n  default:\n    extends: {file: " + fifo + ", service: base}\n",
		"services:\n  default:\n    image: busybox\n    env_file: " + fifo + "\n",
		"services:\n  default:\n    image: busybox\n    label_file: " + fifo + "\n",
		"include: [" + fifo + "]\nservices:\n  default: {image: busybox}\n",
	} {
		writeFiles(t, dir, map[string]string{"compose.yaml": yml})
		done := make(chan error, 1)
		go func() { _, err := loadDir(t, dir, LoadOptions{}); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrPolicyViolation) {
				t.Errorf("%q: err = %v, want a policy violation", yml, err)
			}
		case <-time.After(30 * time.Second):
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Close() // let the reader go
			}
			t.Fatalf("%q: the load opened the FIFO outside the task directory", yml)
		}
	}
}

// Between the load and a sample's create, a bind source inside the task directory becomes a
// symlink to /: the re-check refuses it and leaves the project unchanged; a sound source is
// rewritten to the path it resolves to.
func TestRecheckHostPaths(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"data/x":       "",
		"real/":        "",
		"compose.yaml": "services:\n  default:\n    image: busybox\n    volumes: [\"./data:/data\", \"./link:/l\", \"/dev/null:/n\"]\n    secrets: [s]\nsecrets:\n  s: {file: ./data/x}\n",
	})
	if err := os.Symlink("real", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	p := mustLoad(t, dir, LoadOptions{})
	rdir := ResolvePath(dir)
	if got := p.Services["default"].Volumes[1].Source; got != filepath.Join(rdir, "real") {
		t.Errorf("load kept bind source %q, want it resolved", got)
	}
	pol := DefaultPolicy()
	if err := pol.RecheckHostPaths(p); err != nil {
		t.Fatalf("re-check of an unchanged tree: %v", err)
	}
	// The swap: data becomes a symlink to /.
	if err := os.Rename(filepath.Join(dir, "data"), filepath.Join(dir, "data.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(dir, "data")); err != nil {
		t.Fatal(err)
	}
	before, _ := p.MarshalYAML()
	err := pol.RecheckHostPaths(p)
	vs := problemsOf(t, err)
	if !errors.Is(err, ErrPolicyViolation) || len(vs) != 2 || vs[0].Field != "volumes[0].source" || vs[1].Field != "secrets.s.file" {
		t.Fatalf("re-check after the swap = %v, want the bind and the secret refused", err)
	}
	if after, _ := p.MarshalYAML(); string(after) != string(before) {
		t.Error("a failed re-check changed the project")
	}
}

// compose runs a provider's program on the host: a provider service never gets past Load, and
// nothing of it runs (the orchestrator's test tries it against the engine).
func TestAttackProviderRefused(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default: {image: busybox}\n  x: {image: busybox, provider: {type: /usr/bin/touch, options: {name: [pwned]}}}\n"})
	_, err := loadDir(t, dir, LoadOptions{})
	if vs := problemsOf(t, err); len(vs) != 1 || vs[0].Rule != "providers" || vs[0].Service != "x" || vs[0].OptIn != "--allow providers" {
		t.Errorf("Load = %v, want the provider refused", err)
	}
}

func rel(from, to string) string {
	r, err := filepath.Rel(from, to)
	if err != nil {
		panic(err)
	}
	return r
}
