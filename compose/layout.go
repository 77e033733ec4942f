package compose

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/pelletier/go-toml"

	"github.com/composebox/composebox/internal/errdefs"
)

// Layout is a public suite's task directory convention that Resolve recognised. It decides the
// task's name, its default service and the variables its files expect a harness to set.
type Layout string

const (
	// LayoutNone is a plain compose file, directory or Dockerfile.
	LayoutNone Layout = ""
	// LayoutHarbor is a Harbor task: task.toml, and environment/ with the Dockerfile of the
	// agent's service `main` and an optional docker-compose.yaml merged on top of it.
	LayoutHarbor Layout = "harbor"
	// LayoutTerminalBench is a Terminal-Bench task: task.yaml beside a docker-compose.yaml that
	// names its objects and log paths through T_BENCH_* variables.
	LayoutTerminalBench Layout = "terminal-bench"
	// LayoutInspect is an Inspect-style challenge directory: compose.yaml beside the
	// challenge's own files (eval.yaml, challenge.json, samples.yaml, ...).
	LayoutInspect Layout = "inspect"
)

// The agent's service of the layouts whose harness names it.
const (
	HarborMainService   = "main"
	TerminalBenchClient = "client"
)

// Files, directories and in-container paths of the layouts, as their harnesses use them.
const (
	harborEnvironmentDir   = "environment"
	harborTaskFile         = "task.toml"
	harborAgentLogs        = "/logs/agent"
	harborVerifierLogs     = "/logs/verifier"
	terminalBenchTaskFile  = "task.yaml"
	terminalBenchTestDir   = "/tests"
	terminalBenchLogs      = "/logs"
	terminalBenchAgentLogs = "/agent-logs"
	// Subdirectories of a sample's own directory.
	sampleDirLogs         = "logs"
	sampleDirAgentLogs    = "agent-logs"
	sampleDirVerifierLogs = "verifier-logs"
)

// inspectChallengeFiles are the files that mark an Inspect-style challenge directory.
var inspectChallengeFiles = []string{"eval.yaml", "eval.yml", "challenge.json", "challenge.yml", "challenge.yaml", "samples.yaml", "samples.json"}

// genericDirNames are directory names that say where a task keeps its environment, not which
// task it is: the task is then named after the nearest directory above with another name.
var genericDirNames = map[string]bool{
	"environment": true, "env": true, "challenge": true, "chall": true, "src": true, "source": true,
	"dist": true, "docker": true, "deploy": true, "deployment": true, "build": true, "compose": true,
	"files": true, "task": true, "setup": true, "sandbox": true,
}

// TaskNameOf is the name a task in dir gets from its directory: dir's base name, or the nearest
// parent's when dir is called environment, env, challenge, src, dist, docker and the like.
// "task" when there is none.
func TaskNameOf(dir string) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		b := filepath.Base(d)
		if b == "/" || b == "." || b == "" || d == filepath.Dir(d) {
			return "task"
		}
		if !genericDirNames[strings.ToLower(b)] {
			return b
		}
	}
}

// SampleVars are the variables whose values differ per sample, and the directories among them.
type SampleVars struct {
	// Env maps each variable to its value for the sample.
	Env map[string]string
	// Dirs are the variables of Env whose values are directories on the host that the sample's
	// services bind: the caller creates them before the sample starts and removes them with it.
	Dirs []string
}

// SampleVars returns the variables a sample of this resolution gets: COMPOSE_PROJECT_NAME (the
// sample's project name), and the layout's per-sample names and paths. project is the sample's
// project name, dir a directory the caller owns for the sample (nothing is created here).
// Terminal-Bench gets its client's container and image names, its name prefix and its two log
// directories; Harbor its agent and verifier log directories.
func (r *Resolution) SampleVars(project, dir string) SampleVars {
	v := SampleVars{Env: map[string]string{ProjectNameEnv: project}}
	switch r.Layout {
	case LayoutTerminalBench:
		// Terminal-Bench names these after the trial; every sample is a trial here.
		v.Env["T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME"] = project + "-" + TerminalBenchClient
		v.Env["T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME"] = project + "__" + TerminalBenchClient
		v.Env["T_BENCH_TASK_DOCKER_NAME_PREFIX"] = project
		v.Env["T_BENCH_TASK_LOGS_PATH"] = filepath.Join(dir, sampleDirLogs)
		v.Env["T_BENCH_TASK_AGENT_LOGS_PATH"] = filepath.Join(dir, sampleDirAgentLogs)
		v.Dirs = []string{"T_BENCH_TASK_LOGS_PATH", "T_BENCH_TASK_AGENT_LOGS_PATH"}
	case LayoutHarbor:
		v.Env["HOST_AGENT_LOGS_PATH"] = filepath.Join(dir, sampleDirAgentLogs)
		v.Env["HOST_VERIFIER_LOGS_PATH"] = filepath.Join(dir, sampleDirVerifierLogs)
		v.Dirs = []string{"HOST_AGENT_LOGS_PATH", "HOST_VERIFIER_LOGS_PATH"}
	}
	return v
}

// Referenced lists the directories (values of Dirs) that proj's files reference, which must
// exist before a sample of it starts.
func (v SampleVars) Referenced(proj *types.Project) []string {
	var out []string
	for _, name := range SampleVariables(proj) {
		if slices.Contains(v.Dirs, name) {
			out = append(out, v.Env[name])
		}
	}
	return out
}

// DirPaths are the values of Dirs: the directories binds of a sample may come from, which the
// policy must allow (Policy.AllowingDirs) before the files are loaded.
func (v SampleVars) DirPaths() []string {
	out := make([]string, len(v.Dirs))
	for i, name := range v.Dirs {
		out[i] = v.Env[name]
	}
	return out
}

// AllowingDirs returns a copy of the policy under which host paths may also come from dirs,
// directories composebox made for a sample itself.
func (p Policy) AllowingDirs(dirs ...string) Policy {
	if len(dirs) > 0 {
		p.AllowedMountRoots = append(slices.Clone(p.AllowedMountRoots), dirs...)
	}
	return p
}

// resolveLayout recognises a suite's task directory (or its task file) before the generic cases.
// ok is false when abs is not one.
func resolveLayout(abs string, isDir bool) (*Resolution, bool, error) {
	dir := abs
	if !isDir {
		switch filepath.Base(abs) {
		case harborTaskFile, terminalBenchTaskFile:
			dir = filepath.Dir(abs)
		default:
			return nil, false, nil
		}
	}
	if isFile(filepath.Join(dir, harborTaskFile)) && isDirectory(filepath.Join(dir, harborEnvironmentDir)) {
		r, err := resolveHarbor(dir)
		return r, err == nil, err
	}
	if isDir && filepath.Base(dir) == harborEnvironmentDir && isFile(filepath.Join(filepath.Dir(dir), harborTaskFile)) {
		// A Harbor task's environment/ given directly: Harbor only ever runs it as its task.
		r, err := resolveHarbor(filepath.Dir(dir))
		return r, err == nil, err
	}
	if isFile(filepath.Join(dir, terminalBenchTaskFile)) {
		if f := firstComposeFile(dir); f != "" {
			return &Resolution{
				Source:         SourceDirectory,
				Layout:         LayoutTerminalBench,
				Reason:         fmt.Sprintf("%s is a Terminal-Bench task (task.yaml beside %s)", dir, filepath.Base(f)),
				Files:          []string{f},
				WorkingDir:     dir,
				TaskName:       filepath.Base(dir), // the task id is the directory's name
				DefaultService: TerminalBenchClient,
				Env: map[string]string{
					"T_BENCH_TEST_DIR":                  terminalBenchTestDir,
					"T_BENCH_CONTAINER_LOGS_PATH":       terminalBenchLogs,
					"T_BENCH_CONTAINER_AGENT_LOGS_PATH": terminalBenchAgentLogs,
				},
			}, true, nil
		}
	}
	if isDir && harborEnvironmentOnly(dir) {
		r := harborResolution(dir, TaskNameOf(dir), nil)
		r.Reason = fmt.Sprintf("%s is a Harbor environment directory (a Dockerfile, and %s adding to main without building it): %s",
			dir, filepath.Base(r.Files[0]), r.Reason)
		return r, true, nil
	}
	if !isDir {
		need := "a Harbor task.toml needs environment/ beside it"
		if filepath.Base(abs) == terminalBenchTaskFile {
			need = "a Terminal-Bench task.yaml needs a docker-compose.yaml beside it"
		}
		return nil, false, errdefs.New(ErrInvalidConfig, fmt.Sprintf("resolve %s: not a task directory: %s", abs, need))
	}
	return nil, false, nil
}

// resolveHarbor reads a Harbor task: task.toml's [task] name and [environment] settings, the
// Dockerfile of main in environment/, and environment/'s compose file, merged on top of main.
func resolveHarbor(dir string) (*Resolution, error) {
	tomlPath := filepath.Join(dir, harborTaskFile)
	if real, root := ResolvePath(tomlPath), ResolvePath(dir); !Within(real, root) {
		// Never read: a parse error would quote what it holds.
		return nil, &PolicyError{Op: "resolve " + dir, Violations: []Violation{{Field: harborTaskFile, Value: tomlPath, Rule: "host-path",
			Why: "resolves to " + real + ", outside the task directory " + root}}}
	}
	data, err := readLimited(tomlPath, defaultLimits.MaxFileSize)
	if err != nil {
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "resolve "+tomlPath)
	}
	tree, err := toml.LoadBytes(data)
	if err != nil {
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("resolve %s: %s", tomlPath, boundEcho(err.Error())))
	}
	name := filepath.Base(dir)
	if n, ok := tree.Get("task.name").(string); ok && strings.TrimSpace(n) != "" {
		name = strings.TrimSpace(n)
	}
	r := harborResolution(filepath.Join(dir, harborEnvironmentDir), name, tree)
	r.Reason = fmt.Sprintf("%s is a Harbor task (task.toml, environment/): %s", dir, r.Reason)
	return r, nil
}

// harborResolution is a Harbor environment directory as Harbor runs it, with the settings of
// its task.toml (tree; nil for none): main defined as Harbor's base file defines it, and the
// directory's compose file merged on top. Its Reason says what main is.
func harborResolution(envDir, taskName string, tree *toml.Tree) *Resolution {
	r := &Resolution{
		Source:         SourceDirectory,
		Layout:         LayoutHarbor,
		WorkingDir:     envDir,
		DefaultService: HarborMainService,
		TaskName:       taskName,
	}
	get := func(key string) any {
		if tree == nil {
			return nil
		}
		return tree.Get(key)
	}
	keepAlive := KeepAlive()
	main := map[string]any{
		"command":     []any{keepAlive[0], keepAlive[1], keepAlive[2]},
		"environment": map[string]any{"TEST_DIR": terminalBenchTestDir},
	}
	r.Env = map[string]string{
		"CONTEXT_DIR":            envDir,
		"TEST_DIR":               terminalBenchTestDir,
		"ENV_AGENT_LOGS_PATH":    harborAgentLogs,
		"ENV_VERIFIER_LOGS_PATH": harborVerifierLogs,
		"MAIN_IMAGE_NAME":        "hb__" + SanitizeName(r.TaskName, 60),
	}
	limits := map[string]any{}
	if cpus, ok := tomlNumber(get("environment.cpus")); ok && cpus > 0 {
		limits["cpus"] = strconv.FormatFloat(cpus, 'f', -1, 64)
		r.Env["CPUS"] = limits["cpus"].(string)
	}
	if mb, ok := tomlNumber(get("environment.memory_mb")); ok && mb > 0 {
		limits["memory"] = fmt.Sprintf("%dM", int64(mb))
	} else if m, ok := get("environment.memory").(string); ok && m != "" {
		limits["memory"] = m
	}
	if m, ok := limits["memory"].(string); ok {
		r.Env["MEMORY"] = m
	}
	if allow, ok := get("environment.allow_internet").(bool); ok && !allow {
		r.EgressOff = true
	}
	if len(limits) > 0 {
		main["deploy"] = map[string]any{"resources": map[string]any{"limits": limits}}
	}
	what := ""
	switch img, _ := get("environment.docker_image").(string); {
	case img != "":
		main["image"] = img
		what = "main runs " + img
	case isFile(filepath.Join(envDir, "Dockerfile")):
		// Like a lone Dockerfile's, main's build gets the base image as a build arg.
		main["build"] = map[string]any{"context": envDir, "dockerfile": "Dockerfile"}
		what = "main built from " + filepath.Base(envDir) + "/Dockerfile"
	default:
		what = "main neither built nor given an image by task.toml"
	}
	r.harborMain = main
	if f := firstComposeFile(envDir); f != "" {
		r.Files = []string{f}
		what += ", " + filepath.Base(f) + " merged on top"
	}
	if r.EgressOff {
		what += ", no internet (allow_internet = false)"
	}
	r.Reason = what
	return r
}

// harborEnvironmentOnly reports a Harbor task's environment directory taken out of its task: a
// Dockerfile beside a compose file that adds to service main without giving it an image or a
// build (nor extends, which could). Harbor builds main from that Dockerfile; as a plain compose
// project, main would have nothing to run.
func harborEnvironmentOnly(dir string) bool {
	f := firstComposeFile(dir)
	if f == "" || !isFile(filepath.Join(dir, "Dockerfile")) {
		return false
	}
	data, err := readLimited(f, defaultLimits.MaxFileSize)
	if err != nil {
		return false // the load reports it
	}
	docs, err := parseYAML(data, defaultLimits)
	if err != nil {
		return false
	}
	found := false
	for _, d := range docs {
		main := mappingOf(lookupKey(mappingOf(lookupKey(mappingOf(d), "services")), HarborMainService))
		if main == nil {
			continue
		}
		for _, key := range []string{"image", "build", "extends"} {
			if lookupKey(main, key) != nil {
				return false
			}
		}
		found = true
	}
	return found
}

// harborModel is the generated base file of a Harbor task: the service main, as Harbor's own
// base compose file defines it, which the task's overlay then adds to.
func harborModel(r *Resolution, env map[string]string, escape bool) map[string]any {
	main := deepCopyModel(r.harborMain).(map[string]any)
	if b, ok := main["build"].(map[string]any); ok {
		if base, ok := env[BaseImageEnv]; ok {
			b["args"] = map[string]any{BaseImageEnv: base}
		}
	}
	m := map[string]any{"services": map[string]any{HarborMainService: main}}
	if escape {
		// The overlay is interpolated, and this file with it: its literal paths must stay literal.
		return escapeDollars(m).(map[string]any)
	}
	return m
}

func deepCopyModel(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = deepCopyModel(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopyModel(x)
		}
		return out
	}
	return v
}

func escapeDollars(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = escapeDollars(x)
		}
	case []any:
		for i, x := range t {
			t[i] = escapeDollars(x)
		}
	case string:
		return strings.ReplaceAll(t, "$", "$$")
	}
	return v
}

// markInspect sets LayoutInspect on a directory resolution whose compose file sits beside a
// challenge's own files.
func markInspect(r *Resolution) {
	for _, f := range inspectChallengeFiles {
		if isFile(filepath.Join(r.WorkingDir, f)) {
			r.Layout = LayoutInspect
			r.Reason += fmt.Sprintf(" (an Inspect-style challenge directory: %s beside it)", f)
			return
		}
	}
}

func tomlNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case string:
		f, err := strconv.ParseFloat(n, 64)
		return f, err == nil
	}
	return 0, false
}

func firstComposeFile(dir string) string {
	for _, name := range composeFileNames {
		if f := filepath.Join(dir, name); isFile(f) {
			return f
		}
	}
	return ""
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func isDirectory(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// layoutEnv is the layout's variables under the caller's: a caller's value wins.
func layoutEnv(r *Resolution, overrides map[string]string) map[string]string {
	if len(r.Env) == 0 {
		return overrides
	}
	out := maps.Clone(r.Env)
	maps.Copy(out, overrides)
	return out
}

// sortedKeys is a map's keys in order, for messages.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
