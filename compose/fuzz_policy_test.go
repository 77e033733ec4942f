package compose

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// FuzzPolicyHostPaths builds compose documents from the policy table's host-path fields (binds,
// build contexts, Dockerfiles, additional contexts, env and label files, extends, seccomp
// profiles, secret and config files, include paths, directories and env files, volume bind
// devices, watch paths), each given a hostile value: absolute paths, "..", symlinks out of the
// task directory, to / and dangling, /dev/null, ~, variables, FIFOs, and build contexts that
// hold FIFOs, devices (when the fuzzer runs as root), sockets and symlinks out of the task, or
// whose ignore file is a FIFO or /dev/urandom. Its invariant: whatever loads, passes the policy
// and normalises has every host path inside the task directory (or an extra root the policy
// names) or /dev/null, and nothing read from outside it; planning its images and reading its
// builds' inputs end quickly, refuse every special file with a typed error, and read nothing
// from outside the task. Run it with
//
//	go test ./compose -run '^$' -fuzz FuzzPolicyHostPaths -fuzztime 5m
//
// Its corpus is in testdata/fuzz/FuzzPolicyHostPaths.
func FuzzPolicyHostPaths(f *testing.F) {
	base := f.TempDir()
	root := filepath.Join(base, "task")
	outside := filepath.Join(base, "outside")
	extra := filepath.Join(base, "extra")
	for dir, files := range map[string]map[string]string{
		root: {
			"data/x": "", "sub/": "", "ctx/Dockerfile": "FROM scratch\n", "Dockerfile": "FROM scratch\n",
			"env.env": "A=1\n", "labels": "a=1\n", "seccomp.json": "{}\n",
			"base.yaml": "services:\n  base:\n    image: busybox\n",
			"inc.yaml":  "services:\n  inc:\n    image: busybox\n",
		},
		outside: {
			"leak.env": "LEAK=" + marker + "\n", "labels": "leak=" + marker + "\n", ".env": "LEAK=" + marker + "\n",
			"base.yaml":  "services:\n  base:\n    image: busybox\n    labels: {leak: " + marker + "}\n",
			"inc.yaml":   "services:\n  inc:\n    image: busybox\n    labels: {leak: " + marker + "}\n",
			"Dockerfile": "FROM scratch\n", "seccomp.json": "{}\n",
			// ${COMPOSE_PROJECT_NAME} is the task directory's name, "task".
			"task.yaml": "services:\n  base:\n    image: busybox\n    labels: {leak: " + marker + "}\n",
		},
		extra: {"x": "", "d/": ""},
	} {
		for name, content := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				f.Fatal(err)
			}
			if strings.HasSuffix(name, "/") {
				if err := os.MkdirAll(p, 0o755); err != nil {
					f.Fatal(err)
				}
			}
			if !strings.HasSuffix(name, "/") {
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					f.Fatal(err)
				}
			}
		}
	}
	plantSpecialFiles(f, root, outside)
	for link, target := range map[string]string{
		"link-out": outside, "link-root": "/", "link-up": "..", "dangling": "/nonexistent/target",
		"sub/up": "../..", "link-env": filepath.Join(outside, "leak.env"), "link-extra": extra,
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			f.Fatal(err)
		}
	}
	values := []string{
		"./data", "data/x", "data/../data", "sub", "ctx", "Dockerfile", "env.env", "labels", "base.yaml", "inc.yaml", "seccomp.json",
		"..", "../..", "../outside/leak.env", "sub/../../outside", "data/../../outside/base.yaml",
		root, filepath.Join(root, "data"), outside, filepath.Join(outside, "leak.env"), filepath.Join(outside, "base.yaml"),
		"/", "/etc", "/etc/passwd", "/dev/null", "/var/run/docker.sock", "/proc/self/environ",
		"link-out", "link-out/leak.env", "link-out/base.yaml", "link-root/etc", "link-up/outside/inc.yaml", "dangling/x", "sub/up",
		"sub/up/outside", "link-env", "link-extra/x", "link-extra", extra, filepath.Join(extra, "d"),
		"~", "~/x", "${OUT}/leak.env", "${OUT}", "${ROOT}/data", "${UNSET_VAR:-/etc}", "$${X}", "${UNSET_VAR}",
		"${OUT}/${COMPOSE_PROJECT_NAME}.yaml", "../${COMPOSE_PROJECT_NAME}/data", "${UNSET_VAR:-../outside}/base.yaml",
		// Special files (plantSpecialFiles): contexts, Dockerfiles and env files.
		"ctx-fifo", "ctx-device", "ctx-socket", "ctx-links", "ctx-fifo-ignore", "ctx-urandom-ignore", "ctx-outside-ignore",
		"ctx-excluded-fifo", "fifo", "link-urandom", "ctx-fifo/pipe",
	}
	policies := []Policy{
		DefaultPolicy(),
		{AllowUnconfined: true, AllowVolumeDriverOpts: true},
		{AllowUnconfined: true, AllowVolumeDriverOpts: true, AllowedMountRoots: []string{extra}},
		{AllowedMountRoots: []string{filepath.Join(root, "sub")}, AllowOtherContainers: true},
	}
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{1, 0, 27, 5, 28})
	f.Add([]byte{2, 2, 11, 3, 13, 7, 29, 8, 10})
	f.Add([]byte{1, 14, 15, 11, 30, 12, 19, 13, 22})
	f.Add([]byte{2, 9, 36, 10, 38, 15, 12, 16, 1})
	f.Add([]byte{0, 6, 42, 4, 43, 1, 45, 0, 33})
	f.Add([]byte{4, 7, 48, 5, 16, 0, 49})
	f.Add([]byte{5, 7, 14, 6, 31, 11, 20})
	// Build contexts, Dockerfiles and env files among the special files.
	special := byte(slices.Index(values, "ctx-fifo"))
	for i := range byte(11) {
		f.Add([]byte{0, 2, special + i})
		f.Add([]byte{0, 2, 4, 3, special + i})
		f.Add([]byte{1, 5, special + i})
	}
	opts := LoadOptions{Environment: map[string]string{"OUT": outside, "ROOT": root, BaseImageEnv: "composebox/base:fuzz"}}
	created := time.Unix(1_800_000_000, 0)
	rootResolved := ResolvePath(root)

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		p := policies[int(data[0])%len(policies)]
		doc := fuzzDocument(data[1:], values)
		text, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if data[0]/byte(len(policies))%2 == 1 {
			// The same document with the default service's fields behind an anchor and a
			// merge key, as suites write shared settings.
			services := doc["services"].(map[string]any)
			def := services["default"]
			services["default"] = map[string]any{"<<": "MERGE"}
			body, err := yaml.Marshal(map[string]any{"x-base": def})
			rest, err2 := yaml.Marshal(doc)
			if err != nil || err2 != nil {
				t.Fatal(err, err2)
			}
			text = append([]byte(strings.Replace(string(body), "x-base:", "x-base: &base", 1)),
				strings.Replace(string(rest), "<<: MERGE", "<<: *base", 1)...)
		}
		lo := opts
		lo.Policy = &p
		proj, err := Load(t.Context(), FromYAML(text, root), lo)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) && !errors.Is(err, ErrPolicyViolation) {
				t.Fatalf("Load error is neither category: %v\n%s", err, text)
			}
			if strings.Contains(err.Error(), marker) {
				t.Fatalf("the error carries content from outside the task:\n%v", err)
			}
			return
		}
		n, err := Normalize(proj, NormalizeOptions{Name: "cbx-fuzz-00000000", Task: "fuzz", Sample: "00000000", Owner: "fuzz", Created: created, APIVersion: "1.41"})
		if err != nil {
			return
		}
		roots := []string{rootResolved}
		for _, r := range p.AllowedMountRoots {
			roots = append(roots, ResolvePath(r))
		}
		for _, hp := range hostPaths(n) {
			r := ResolvePath(hp.path)
			ok := r == "/dev/null"
			for _, root := range roots {
				ok = ok || Within(r, root)
			}
			if !ok {
				t.Fatalf("%s %s resolves to %s, outside %v\n%s", hp.field, hp.path, r, roots, text)
			}
		}
		out, _ := n.MarshalYAML()
		if strings.Contains(string(out), marker) || strings.Contains(fmt.Sprint(n.Environment), marker) {
			t.Fatalf("content read from outside the task:\n%s\nfrom\n%s", out, text)
		}
		if err := p.RecheckHostPaths(n); err != nil {
			t.Fatalf("re-check of an unchanged tree: %v", err)
		}
		checkBuildInputs(t, n, p, text)
	})
}

// plantSpecialFiles makes the task's hostile build inputs: contexts holding a FIFO, a device
// (as root only), a socket, symlinks out of the task; ignore files that are a FIFO, a symlink
// to /dev/urandom or to a file outside; and a FIFO and a /dev/urandom link at the top.
func plantSpecialFiles(f *testing.F, root, outside string) {
	mk := func(dir string, files map[string]string) string {
		d := filepath.Join(root, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
				f.Fatal(err)
			}
		}
		return d
	}
	df := map[string]string{"Dockerfile": "FROM scratch\nCOPY . /\n"}
	fifo := func(p string) {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	link := func(target, p string) {
		if err := os.Symlink(target, p); err != nil {
			f.Fatal(err)
		}
	}
	fifo(filepath.Join(mk("ctx-fifo", df), "pipe"))
	if d := mk("ctx-device", df); os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(d, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			f.Fatal(err)
		}
	}
	// A socket's path is bounded (108 bytes): bind it from inside its directory.
	sockDir := mk("ctx-socket", df)
	if wd, err := os.Getwd(); err == nil {
		if err := os.Chdir(sockDir); err == nil {
			if ln, err := net.Listen("unix", "sock"); err == nil {
				f.Cleanup(func() { ln.Close() })
			}
			_ = os.Chdir(wd)
		}
	}
	links := mk("ctx-links", df)
	link(filepath.Join(outside, "leak.env"), filepath.Join(links, "leak"))
	link("/dev/urandom", filepath.Join(links, "urandom"))
	link("/", filepath.Join(links, "root"))
	fifo(filepath.Join(mk("ctx-fifo-ignore", df), ".dockerignore"))
	link("/dev/urandom", filepath.Join(mk("ctx-urandom-ignore", df), ".dockerignore"))
	link(filepath.Join(outside, "leak.env"), filepath.Join(mk("ctx-outside-ignore", df), ".dockerignore"))
	fifo(filepath.Join(mk("ctx-excluded-fifo", map[string]string{"Dockerfile": "FROM scratch\n", ".dockerignore": "pipe\n"}), "pipe"))
	fifo(filepath.Join(root, "fifo"))
	link("/dev/urandom", filepath.Join(root, "link-urandom"))
}

// checkBuildInputs plans the images of a project that passed the policy and reads each build's
// inputs: each must end within seconds (a FIFO opened for reading blocks for ever, /dev/urandom
// never ends), refuse what it refuses with a typed error, and carry nothing from outside.
func checkBuildInputs(t *testing.T, proj *types.Project, p Policy, text []byte) {
	roots := p.TaskRoots(proj.WorkingDir)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := PlanImagesContext(ctx, proj, "fuzz", PlanOptions{Roots: roots})
		for _, name := range proj.ServiceNames() {
			if b := proj.Services[name].Build; err == nil && b != nil && !isRemoteContext(b.Context) {
				_, err = ReadBuildInput(ctx, b, roots)
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			return
		}
		if !errors.Is(err, ErrInvalidConfig) && !errors.Is(err, ErrPolicyViolation) {
			t.Fatalf("build inputs: error is neither category: %v\n%s", err, text)
		}
		if strings.Contains(err.Error(), marker) {
			t.Fatalf("build inputs: the error carries content from outside the task:\n%v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("planning the images hung on\n%s", text)
	}
}

type fuzzPath struct{ field, path string }

// hostPaths lists every host path a loaded project still names.
func hostPaths(p *types.Project) []fuzzPath {
	var out []fuzzPath
	local := func(ctx string) bool {
		return ctx != "" && !isRemoteContext(ctx) && !strings.Contains(ctx, "://") && !strings.HasPrefix(ctx, types.ServicePrefix)
	}
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				out = append(out, fuzzPath{name + " bind", v.Source})
			}
		}
		if b := s.Build; b != nil && local(b.Context) {
			out = append(out, fuzzPath{name + " build.context", b.Context})
			if b.DockerfileInline == "" {
				out = append(out, fuzzPath{name + " build.dockerfile", DockerfilePath(b)})
			}
			for k, c := range b.AdditionalContexts {
				if local(c) {
					out = append(out, fuzzPath{name + " additional_contexts." + k, c})
				}
			}
		}
		for _, e := range s.EnvFiles {
			out = append(out, fuzzPath{name + " env_file", e.Path})
		}
		for _, l := range s.LabelFiles {
			out = append(out, fuzzPath{name + " label_file", l})
		}
		for _, o := range s.SecurityOpt {
			if _, _, profile := parseSecurityOpt(o); profile != "" {
				if !filepath.IsAbs(profile) {
					profile = filepath.Join(p.WorkingDir, profile)
				}
				out = append(out, fuzzPath{name + " seccomp", profile})
			}
		}
		if s.Develop != nil {
			for _, w := range s.Develop.Watch {
				out = append(out, fuzzPath{name + " develop.watch.path", w.Path})
			}
		}
	}
	for k, v := range p.Volumes {
		if dev, ok := bindDevice(v); ok {
			out = append(out, fuzzPath{"volume " + k + " device", dev})
		}
	}
	for k, s := range p.Secrets {
		if s.File != "" {
			out = append(out, fuzzPath{"secret " + k, s.File})
		}
	}
	for k, c := range p.Configs {
		if c.File != "" {
			out = append(out, fuzzPath{"config " + k, c.File})
		}
	}
	return out
}

// fuzzDocument reads data as pairs (field, value) and builds a compose document setting those
// host-path fields to those values.
func fuzzDocument(data []byte, values []string) map[string]any {
	svc := map[string]any{"image": "busybox"}
	other := map[string]any{"image": "busybox"}
	doc := map[string]any{"services": map[string]any{"default": svc}}
	top := func(key string) map[string]any {
		m, ok := doc[key].(map[string]any)
		if !ok {
			m = map[string]any{}
			doc[key] = m
		}
		return m
	}
	appendTo := func(m map[string]any, key string, v any) {
		l, _ := m[key].([]any)
		m[key] = append(l, v)
	}
	build := func() map[string]any {
		b, ok := svc["build"].(map[string]any)
		if !ok {
			b = map[string]any{"context": "."}
			svc["build"] = b
		}
		return b
	}
	for i := 0; i+1 < len(data); i += 2 {
		v := values[int(data[i+1])%len(values)]
		n := i / 2
		switch data[i] % 17 {
		case 0:
			appendTo(svc, "volumes", v+":/t"+fmt.Sprint(n))
		case 1:
			appendTo(svc, "volumes", map[string]any{"type": "bind", "source": v, "target": fmt.Sprintf("/l%d", n)})
		case 2:
			build()["context"] = v
		case 3:
			build()["dockerfile"] = v
		case 4:
			ac, _ := build()["additional_contexts"].(map[string]any)
			if ac == nil {
				ac = map[string]any{}
				build()["additional_contexts"] = ac
			}
			ac[fmt.Sprintf("a%d", n)] = v
		case 5:
			appendTo(svc, "env_file", v)
		case 6:
			appendTo(svc, "label_file", v)
		case 7:
			delete(svc, "image")
			svc["extends"] = map[string]any{"file": v, "service": "base"}
		case 8:
			appendTo(svc, "security_opt", "seccomp="+v)
		case 9:
			top("secrets")[fmt.Sprintf("s%d", n)] = map[string]any{"file": v}
			appendTo(svc, "secrets", fmt.Sprintf("s%d", n))
		case 10:
			top("configs")[fmt.Sprintf("c%d", n)] = map[string]any{"file": v}
			appendTo(svc, "configs", fmt.Sprintf("c%d", n))
		case 11:
			l, _ := doc["include"].([]any)
			doc["include"] = append(l, map[string]any{"path": v})
		case 12:
			l, _ := doc["include"].([]any)
			doc["include"] = append(l, map[string]any{"path": "inc.yaml", "project_directory": v})
		case 13:
			l, _ := doc["include"].([]any)
			doc["include"] = append(l, map[string]any{"path": "inc.yaml", "env_file": v})
		case 14:
			name := fmt.Sprintf("v%d", n)
			top("volumes")[name] = map[string]any{"driver": "local", "driver_opts": map[string]any{"type": "none", "o": "bind", "device": v}}
			appendTo(svc, "volumes", name+":/v"+fmt.Sprint(n))
		case 15:
			d, _ := svc["develop"].(map[string]any)
			if d == nil {
				d = map[string]any{}
				svc["develop"] = d
			}
			appendTo(d, "watch", map[string]any{"path": v, "action": "rebuild"})
		case 16:
			doc["services"].(map[string]any)["other"] = other
			appendTo(other, "volumes", v+":/o"+fmt.Sprint(n))
		}
	}
	return doc
}
