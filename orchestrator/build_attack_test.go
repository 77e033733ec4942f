package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// newHostServer is a host server on loopback (see serveHost): what a build must never reach.
func newHostServer(t *testing.T) *hostServer { return serveHost(t, "127.0.0.1") }

// writeTask writes files (relative path → content) into a fresh task directory.
func writeTask(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// buildTaskYAML is a one-service task built from build (a YAML mapping body, indented 6).
func buildTaskYAML(build string) string {
	return "services:\n  default:\n    build:\n" + build + "    command: [\"tail\", \"-f\", \"/dev/null\"]\n"
}

// taskInitErr runs TaskInit, which must fail; a task that starts anyway is cleaned up.
func taskInitErr(t *testing.T, o *orchestrator.Orchestrator, spec orchestrator.TaskSpec) error {
	t.Helper()
	task, err := o.TaskInit(t.Context(), spec)
	if err == nil {
		t.Cleanup(func() { _ = task.Cleanup(context.Background()) })
		return errors.New("task init succeeded")
	}
	return err
}

// Dockerfiles that ADD a URL on the host's loopback: refused before the build runs, with the
// opt-in named, and still refused with the opt-in, since the host is the host. The server never
// sees a request, whatever form the Dockerfile takes.
func TestBuildCannotADDFromTheHost(t *testing.T) {
	o, _ := newOrchestrator(t)
	srv := newHostServer(t)
	df := "ARG " + compose.BaseImageEnv + "\nFROM ${" + compose.BaseImageEnv + "}\nADD http://" + srv.addr + "/secret.txt /loot.txt\n"
	args := "      args:\n        " + compose.BaseImageEnv + ": ${" + compose.BaseImageEnv + "}\n"
	inline := strings.ReplaceAll(df, "$", "$$")
	cases := map[string]map[string]string{
		"dockerfile":      {"compose.yaml": buildTaskYAML("      context: .\n" + args), "Dockerfile": df},
		"inline":          {"compose.yaml": buildTaskYAML("      context: .\n" + args + "      dockerfile_inline: |\n        " + strings.ReplaceAll(inline, "\n", "\n        ") + "\n")},
		"network none":    {"compose.yaml": buildTaskYAML("      context: .\n      network: none\n" + args), "Dockerfile": df},
		"lone dockerfile": {"Dockerfile": df},
	}
	testutil.BaseImage(t)
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writeTask(t, files)
			for _, allow := range []bool{false, true} {
				p := compose.DefaultPolicy()
				p.AllowAddURL = allow
				err := taskInitErr(t, o, orchestrator.TaskSpec{Name: "addurl-" + compose.NewSampleID(), Path: dir, Policy: &p})
				if !errors.Is(err, orchestrator.ErrPolicyViolation) || !strings.Contains(err.Error(), "ADD http://"+srv.addr) {
					t.Fatalf("allow add-url %v: err = %v, want a policy violation naming the ADD", allow, err)
				}
				if !allow && !strings.Contains(err.Error(), "--allow add-url") {
					t.Errorf("without the opt-in, the error does not name it: %v", err)
				}
				if allow && !strings.Contains(err.Error(), "loopback") {
					t.Errorf("with the opt-in, the error does not say the host is loopback: %v", err)
				}
			}
			if got := srv.requests(); len(got) > 0 {
				t.Errorf("the host server got requests: %v", got)
			}
		})
	}
}

// Dockerfiles whose base images point at a registry on the host's loopback: every one is
// missing on the engine, which is not_found naming the image, checked before the build; the
// daemon never pulls, so the server never sees a request.
func TestBuildNeverPullsItsBaseImages(t *testing.T) {
	o, _ := newOrchestrator(t)
	srv := newHostServer(t)
	testutil.BaseImage(t)
	evil := srv.addr + "/evil/img:1"
	base := "ARG " + compose.BaseImageEnv + "\nFROM ${" + compose.BaseImageEnv + "}\n"
	args := "      args:\n        " + compose.BaseImageEnv + ": ${" + compose.BaseImageEnv + "}\n"
	cases := map[string]map[string]string{
		"FROM":                {"Dockerfile": "FROM " + evil + "\nRUN true\n"},
		"FROM through an arg": {"compose.yaml": buildTaskYAML("      context: .\n      args:\n        REG: " + srv.addr + "\n"), "Dockerfile": "ARG REG=docker.io\nFROM $REG/evil/img:1\n"},
		"later stage":         {"Dockerfile": base + "RUN true\nFROM " + evil + " AS second\n"},
		"COPY --from":         {"compose.yaml": buildTaskYAML("      context: .\n" + args), "Dockerfile": base + "COPY --from=" + evil + " /etc/passwd /p\n"},
		"network none":        {"compose.yaml": buildTaskYAML("      context: .\n      network: none\n"), "Dockerfile": "FROM " + evil + "\n"},
		"inline":              {"compose.yaml": buildTaskYAML("      context: .\n      dockerfile_inline: |\n        FROM " + evil + "\n")},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writeTask(t, files)
			err := taskInitErr(t, o, orchestrator.TaskSpec{Name: "pull-" + compose.NewSampleID(), Path: dir})
			if !errors.Is(err, orchestrator.ErrNotFound) || orchestrator.ErrorKind(err) != "not_found" || !strings.Contains(err.Error(), evil) {
				t.Fatalf("err = %v (kind %s), want not_found naming %s", err, orchestrator.ErrorKind(err), evil)
			}
			if got := srv.requests(); len(got) > 0 {
				t.Errorf("the host server got requests: %v", got)
			}
		})
	}
}

// A build whose step fails is build_failed, naming the step, with the log's tail; the images
// its earlier steps committed are removed with it.
func TestBuildFailureIsItsOwnKindAndLeavesNoImage(t *testing.T) {
	o, _ := newOrchestrator(t)
	testutil.BaseImage(t)
	marker := fmt.Sprintf("dev.composebox.test-build=failing-%d", time.Now().UnixNano())
	testutil.RemoveLabelledImages(t, dockerClient(t, o), marker)
	df := "ARG " + compose.BaseImageEnv + "\nFROM ${" + compose.BaseImageEnv + "}\nLABEL " + marker + "\nRUN echo one > /one\n" +
		"RUN echo step-output-9931; exit 7\n"
	dir := writeTask(t, map[string]string{
		"compose.yaml": buildTaskYAML("      context: .\n      args:\n        " + compose.BaseImageEnv + ": ${" + compose.BaseImageEnv + "}\n"),
		"Dockerfile":   df,
	})
	err := taskInitErr(t, o, orchestrator.TaskSpec{Name: "fail-" + compose.NewSampleID(), Path: dir})
	var be *orchestrator.BuildError
	if !errors.As(err, &be) || !errors.Is(err, orchestrator.ErrBuildFailed) || orchestrator.ErrorKind(err) != "build_failed" {
		t.Fatalf("err = %v (kind %s), want build_failed", err, orchestrator.ErrorKind(err))
	}
	if !strings.Contains(be.Step, "RUN echo step-output-9931; exit 7") || !strings.Contains(be.Log, "step-output-9931") {
		t.Errorf("step %q, log %q: want the failing step and its output", be.Step, be.Log)
	}
	if left := testutil.LabelledImages(t, dockerClient(t, o), marker); len(left) > 0 {
		t.Errorf("the failed build left images behind: %v", left)
	}
}

// Hostile build inputs: each is refused by type or place, at once, without being read.
func TestBuildInputsAreReadByTypeAndBounded(t *testing.T) {
	o, _ := newOrchestrator(t)
	testutil.BaseImage(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "patterns"), []byte("*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	df := "ARG " + compose.BaseImageEnv + "\nFROM ${" + compose.BaseImageEnv + "}\nCOPY . /ctx\n"
	yaml := buildTaskYAML("      context: .\n      args:\n        " + compose.BaseImageEnv + ": ${" + compose.BaseImageEnv + "}\n")
	mkfifo := func(p string) error { return syscall.Mkfifo(p, 0o644) }
	cases := []struct {
		name  string
		plant func(dir string) error
		kind  string
		says  string
	}{
		{"FIFO .dockerignore", func(dir string) error { return mkfifo(filepath.Join(dir, ".dockerignore")) }, "invalid_config", "a FIFO"},
		{".dockerignore to /dev/urandom", func(dir string) error { return os.Symlink("/dev/urandom", filepath.Join(dir, ".dockerignore")) }, "policy_violation", "/dev/urandom"},
		{".dockerignore outside the task", func(dir string) error {
			return os.Symlink(filepath.Join(outside, "patterns"), filepath.Join(dir, ".dockerignore"))
		}, "policy_violation", "outside"},
		{"Dockerfile.dockerignore FIFO", func(dir string) error { return mkfifo(filepath.Join(dir, "Dockerfile.dockerignore")) }, "invalid_config", "a FIFO"},
		{"FIFO in the context", func(dir string) error { return mkfifo(filepath.Join(dir, "sub", "pipe")) }, "invalid_config", "sub/pipe is a FIFO"},
		{"socket in the context", func(dir string) error {
			ln, err := net.Listen("unix", filepath.Join(dir, "sock"))
			if err == nil {
				t.Cleanup(func() { ln.Close() })
			}
			return err
		}, "invalid_config", "sock is a socket"},
		{"device in the context", func(dir string) error {
			if os.Geteuid() != 0 {
				t.Skip("mknod needs root")
			}
			return syscall.Mknod(filepath.Join(dir, "null"), syscall.S_IFCHR|0o666, 1<<8|3)
		}, "invalid_config", "null is a character device"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTask(t, map[string]string{"compose.yaml": yaml, "Dockerfile": df, "sub/file": "x"})
			if err := tc.plant(dir); err != nil {
				t.Fatal(err)
			}
			unblockFIFOs(t, dir)
			done := make(chan error, 1)
			go func() {
				done <- taskInitErr(t, o, orchestrator.TaskSpec{Name: "input-" + compose.NewSampleID(), Path: dir})
			}()
			select {
			case err := <-done:
				if orchestrator.ErrorKind(err) != tc.kind || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("err = %v (kind %s), want %s saying %q", err, orchestrator.ErrorKind(err), tc.kind, tc.says)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("task init hung on the hostile input")
			}
		})
	}

	// A FIFO the ignore file excludes is never sent, so it is fine.
	t.Run("excluded FIFO", func(t *testing.T) {
		dir := writeTask(t, map[string]string{"compose.yaml": yaml, "Dockerfile": df, ".dockerignore": "pipe\n"})
		if err := mkfifo(filepath.Join(dir, "pipe")); err != nil {
			t.Fatal(err)
		}
		unblockFIFOs(t, dir)
		name := "excluded-" + compose.NewSampleID()
		removeTaskImages(t, o, name)
		task := taskInit(t, o, orchestrator.TaskSpec{Name: name, Path: dir})
		_, out := runIn(t, task, "default", "ls /ctx")
		if strings.Contains(out, "pipe") || !strings.Contains(out, "Dockerfile") {
			t.Errorf("/ctx holds %q, want the context without the excluded FIFO", out)
		}
	})
}

// unblockFIFOs opens every FIFO in dir for writing at the end of the test, so that a reader
// that did block on one (the fault under test) is let go.
func unblockFIFOs(t *testing.T, dir string) {
	t.Cleanup(func() {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type()&os.ModeNamedPipe != 0 {
				if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			}
			return nil
		})
	})
}

// removeTaskImages removes, at the end of the test, the images built for task name.
func removeTaskImages(t *testing.T, o *orchestrator.Orchestrator, name string) {
	testutil.RemoveLabelledImages(t, dockerClient(t, o), "dev.composebox.task="+name)
}

// A cancelled TaskInit stops its build within 2 s, and the build's images go with it.
func TestBuildStopsWhenItsContextIsCancelled(t *testing.T) {
	o, _ := newOrchestrator(t)
	testutil.BaseImage(t)
	c := dockerClient(t, o)
	marker := fmt.Sprintf("dev.composebox.test-build=cancel-%d", time.Now().UnixNano())
	testutil.RemoveLabelledImages(t, c, marker)
	t.Cleanup(func() {
		list, _ := c.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", marker))})
		for _, ctr := range list {
			_ = c.ContainerRemove(context.Background(), ctr.ID, container.RemoveOptions{Force: true})
		}
	})
	dir := writeTask(t, map[string]string{
		"compose.yaml": buildTaskYAML("      context: .\n      args:\n        " + compose.BaseImageEnv + ": ${" + compose.BaseImageEnv + "}\n"),
		"Dockerfile":   "ARG " + compose.BaseImageEnv + "\nFROM ${" + compose.BaseImageEnv + "}\nLABEL " + marker + "\nRUN sleep 300\n",
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		task, err := o.TaskInit(ctx, orchestrator.TaskSpec{Name: "cancel-" + compose.NewSampleID(), Path: dir})
		if err == nil {
			_ = task.Cleanup(context.Background())
		}
		done <- err
	}()
	testutil.CancelDuringRunStep(t, c, marker, cancel, done, "task init")
}
