package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
)

// baseInfo says which compose CLI the baseline drives.
type baseInfo struct {
	Bin     string `json:"bin"`
	V2      bool   `json:"v2"`
	Version string `json:"version"`
}

// Name is how the report names the baseline.
func (b baseInfo) Name() string {
	if b.V2 {
		return "docker compose " + b.Version + " (compose v2 CLI, built from the module)"
	}
	return "docker-compose " + b.Version + " (Debian's v1, the fallback when compose v2 cannot be built)"
}

// Short is the baseline's name in table rows.
func (b baseInfo) Short() string {
	if b.V2 {
		return "compose v2 CLI"
	}
	return "docker-compose v1"
}

var versionRE = regexp.MustCompile(`v?\d+\.\d+\.\d+`)

// probeBaseline asks the compose binary for its version. A v2 binary answers `version --short`
// with "2.40.3"; docker-compose v1 answers `version --short` with "1.29.2".
func probeBaseline(ctx context.Context, bin string) (baseInfo, error) {
	out, err := exec.CommandContext(ctx, bin, "version", "--short").Output()
	if err != nil {
		return baseInfo{}, fmt.Errorf("%s version: %w", bin, err)
	}
	v := versionRE.FindString(string(out))
	if v == "" {
		return baseInfo{}, fmt.Errorf("%s version: unrecognised %q", bin, strings.TrimSpace(string(out)))
	}
	v = "v" + strings.TrimPrefix(v, "v")
	return baseInfo{Bin: bin, V2: !strings.HasPrefix(v, "v1."), Version: v}, nil
}

// baseline drives the compose CLI (and the docker CLI), one process per operation.
type baseline struct {
	info baseInfo
	env  []string
	// docker is used only to poll readiness when the CLI is v1, which has no --wait.
	docker client.APIClient
}

func newBaseline(o options, c client.APIClient) *baseline {
	env := append(os.Environ(), "COMPOSEBOX_BASE_IMAGE="+o.BaseImage, "COMPOSE_PROJECT_NAME=", "DOCKER_CLI_HINTS=false")
	return &baseline{info: o.Baseline, env: env, docker: c}
}

// cliTimeout bounds one CLI invocation.
const cliTimeout = 4 * time.Minute

// run runs one CLI process. Its stdout goes to stdout (discarded when nil); stderr is kept for
// the error. The process gets its own process group, so a Ctrl-C in the terminal reaches this
// program, which then kills it through ctx and removes what it left by label.
func (b *baseline) run(ctx context.Context, stdin io.Reader, stdout io.Writer, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = b.env
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return &cliError{verb: verb(filepath.Base(name), args), line: filepath.Base(name) + " " + strings.Join(args, " "), err: err, text: errText(stderr.String())}
	}
	return nil
}

// cliError is a CLI process that failed: its command line, exit status and what it said.
type cliError struct {
	verb, line string
	err        error
	text       string
}

func (e *cliError) Error() string { return fmt.Sprintf("%s: %v: %s", e.line, e.err, e.text) }
func (e *cliError) Unwrap() error { return e.err }

// Short is the error as the report shows it: `binary verb`: message.
func (e *cliError) Short() string { return fmt.Sprintf("`%s`: %s", e.verb, e.text) }

// verb is the binary and its subcommand, skipping compose's -p and -f options.
func verb(bin string, args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-p" || a == "-f":
			i++
		case !strings.HasPrefix(a, "-"):
			return bin + " " + a
		}
	}
	return bin
}

// errText is the line of CLI output that says what went wrong: compose v2 prints progress lines
// before its error, so the last line that mentions an error, else the last lines.
func errText(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		low := strings.ToLower(l)
		if strings.Contains(low, "error") || strings.Contains(low, "could not") || strings.Contains(low, "failed") {
			return l
		}
	}
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.TrimSpace(strings.Join(lines, " | "))
}

// cliProject is one sample run through the compose CLI.
type cliProject struct {
	b        *baseline
	name     string
	files    []string
	services int // how many services must be ready (v1 polling)
}

func (b *baseline) project(name string, files []string, services int) *cliProject {
	return &cliProject{b: b, name: name, files: files, services: services}
}

func (p *cliProject) compose(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) error {
	full := []string{"-p", p.name}
	for _, f := range p.files {
		full = append(full, "-f", f)
	}
	return p.b.run(ctx, stdin, stdout, p.b.info.Bin, append(full, args...)...)
}

// Up is `up -d --wait` (v2). docker-compose v1 has no --wait: `up -d`, then the containers'
// states are polled every 100 ms until every service runs and is healthy where it has a
// healthcheck.
func (p *cliProject) Up(ctx context.Context) error {
	if p.b.info.V2 {
		return p.compose(ctx, nil, nil, "up", "-d", "--wait", "--wait-timeout", "180")
	}
	if err := p.compose(ctx, nil, nil, "up", "-d"); err != nil {
		return err
	}
	return p.pollReady(ctx)
}

func (p *cliProject) pollReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", labels.ComposeProjectLabel+"="+p.name))
	for {
		ctrs, err := p.b.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			return fmt.Errorf("wait for %s: %w", p.name, err)
		}
		ready := 0
		for _, c := range ctrs {
			switch {
			case c.State == "exited" || c.State == "dead":
				return fmt.Errorf("wait for %s: container %s %s", p.name, c.Names, c.Status)
			case strings.Contains(c.Status, "(unhealthy)"):
				return fmt.Errorf("wait for %s: container %s unhealthy", p.name, c.Names)
			case c.State == "running" && !strings.Contains(c.Status, "(health: starting)"):
				ready++
			}
		}
		if ready >= p.services {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", p.name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Exec is `exec -T SERVICE ARGS...`; its stdout is returned.
func (p *cliProject) Exec(ctx context.Context, stdin io.Reader, service string, args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := p.compose(ctx, stdin, &out, append([]string{"exec", "-T", service}, args...)...)
	return out.Bytes(), err
}

// CopyIn puts a local file at path in the service's container: `cp` with compose v2;
// docker-compose v1 has no cp, so `exec -T SERVICE sh -c 'cat > path'` with the file on stdin.
func (p *cliProject) CopyIn(ctx context.Context, service, local, path string) error {
	if p.b.info.V2 {
		return p.compose(ctx, nil, nil, "cp", local, service+":"+path)
	}
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = p.Exec(ctx, f, service, "sh", "-c", `cat > "$0"`, path)
	return err
}

// CopyOut reads a file of the service's container: `cp` to a local file with compose v2,
// `exec -T SERVICE cat path` with v1.
func (p *cliProject) CopyOut(ctx context.Context, service, path, local string) ([]byte, error) {
	if p.b.info.V2 {
		if err := p.compose(ctx, nil, nil, "cp", service+":"+path, local); err != nil {
			return nil, err
		}
		defer os.Remove(local)
		return os.ReadFile(local)
	}
	return p.Exec(ctx, nil, service, "cat", path)
}

// Down is `down -v -t 1`, on a context detached from ctx so that it also runs after Ctrl-C.
func (p *cliProject) Down(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	return p.compose(ctx, nil, nil, "down", "-v", "-t", "1")
}

// DockerExec is `docker exec CONTAINER ARGS...`.
func (b *baseline) DockerExec(ctx context.Context, ctr string, args ...string) error {
	return b.run(ctx, nil, nil, "docker", append([]string{"exec", ctr}, args...)...)
}

// writeOverride writes the baseline's override file for a project: every service gets the
// benchmark's labels, `init: true` (as composebox gives it) and, where given, a fixed image
// instead of a per-project build; the default network gets the labels too, so that the sweep
// finds it.
func writeOverride(path string, info baseInfo, services []string, images map[string]string) error {
	var b strings.Builder
	if !info.V2 {
		b.WriteString("version: \"3.8\"\n")
	}
	lbl := fmt.Sprintf("{%s: \"true\", %s: %s, %s: scale}", labels.LabelManaged, labels.LabelTask, taskCLI, labels.LabelBench)
	b.WriteString("services:\n")
	for _, s := range services {
		fmt.Fprintf(&b, "  %s:\n    init: true\n    labels: %s\n", s, lbl)
		if img, ok := images[s]; ok {
			fmt.Fprintf(&b, "    image: %s\n", img)
			if info.V2 {
				b.WriteString("    pull_policy: never\n")
			}
		}
	}
	fmt.Fprintf(&b, "networks:\n  default:\n    labels: %s\n", lbl)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
