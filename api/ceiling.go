package api

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/orchestrator"
)

// Ceiling is the most a request may ask for. The operator sets it when starting the server,
// with the flags a task takes on the command line (`composebox serve --allow KIND --allow-cap
// NAME --allow-mount-root DIR --policy FILE --pass-env NAME`) and `--task-root DIR`. A request
// gets what it asks for within it, and nothing it does not ask for: an opt-in of the ceiling
// that a request does not name stays off for that task. What a request asks beyond it is
// refused with policy_violation, each item naming the serve flag that would allow it. The zero
// value allows nothing beyond the default policy, passes no variable and accepts no
// working_dir.
type Ceiling struct {
	// Policy bounds a request's policy: each opt-in, capability and mount root it names must
	// be one this policy allows (a mount root within one of its roots). Its default limits
	// (memory, cpus, pids, egress off) and docker socket paths hold for every task, whatever
	// the request says.
	Policy compose.Policy
	// PassEnv names the variables of the server's environment that a request's pass_env may
	// name.
	PassEnv []string
	// TaskRoots are the directories a request's working_dir must lie in; when there are any,
	// its path and files must lie in them too. Without any, a request gives no working_dir (a
	// compose_yaml task gets a private empty directory) and names compose files anywhere but
	// in a directory of keys.
	TaskRoots []string
	// Refused are more directories no request may name, nor a working_dir hold: the server's
	// state directory, which holds its token.
	Refused []string
}

// credentialDirs are directory names that hold keys or credentials, wherever they are: no
// request names a task inside one, whatever the task roots.
var credentialDirs = []string{".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".password-store", "pki"}

// credentialTrees are host directories of keys and cluster state that no request names a task
// inside: a Kubernetes node's (and the local cluster's) certificates and tokens.
var credentialTrees = []string{"/var/lib/composebox-k8s", "/etc/kubernetes", "/var/lib/kubelet", "/var/lib/etcd", "/var/lib/rancher"}

// Check reports a task root that cannot be one: not an existing directory, or a directory no
// task may be in (the host's root, a home directory, a system directory, a directory of keys).
// `composebox serve` calls it before it listens.
func (c Ceiling) Check() error {
	for _, root := range c.TaskRoots {
		if !filepath.IsAbs(root) {
			return fmt.Errorf("--task-root %s: want an absolute path", root)
		}
		fi, err := os.Stat(root)
		if err != nil {
			return fmt.Errorf("--task-root %s: %w", root, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("--task-root %s: not a directory", root)
		}
		if why := compose.RefusedRoot(root); why != "" {
			return fmt.Errorf("--task-root %s: %s", root, why)
		}
		if why := c.credentials(compose.ResolvePath(root), true); why != "" {
			return fmt.Errorf("--task-root %s: %s", root, why)
		}
	}
	for _, root := range c.Policy.AllowedMountRoots {
		if !filepath.IsAbs(root) {
			return fmt.Errorf("--allow-mount-root %s: want an absolute path", root)
		}
	}
	return nil
}

// credentials says why a resolved path is in (or, with holds, holds) a directory of keys or
// of the server's own state; "" when it is not.
func (c Ceiling) credentials(resolved string, holds bool) string {
	for _, part := range strings.Split(resolved, "/") {
		if slices.Contains(credentialDirs, part) {
			return fmt.Sprintf("it is in a directory of keys or credentials (%s)", part)
		}
	}
	trees := append(slices.Clone(credentialTrees), c.Refused...)
	for _, t := range trees {
		t = compose.ResolvePath(filepath.Clean(t))
		if compose.Within(resolved, t) || (holds && compose.Within(t, resolved)) {
			return "it is or holds " + t + ", which holds keys or the server's own state"
		}
	}
	return ""
}

// ceilingRule is the rule name of a request's ask beyond the ceiling.
const ceilingRule = "server-ceiling"

// narrow fills spec's policy, variables and host paths from the request, within the ceiling:
// every item beyond it comes back in one *compose.PolicyError (policy_violation), each naming
// the serve flag that allows it.
func (c Ceiling) narrow(req TaskRequest, spec *orchestrator.TaskSpec) error {
	var out []compose.Violation
	beyond := func(field, value, why, flag string) {
		out = append(out, compose.Violation{Field: field, Value: value, Rule: ceilingRule, Why: why, OptIn: "composebox serve " + flag})
	}

	// The policy: the default, the operator's limits, and the opt-ins the request asks for.
	p := compose.DefaultPolicy()
	if len(c.Policy.DockerSockets) > 0 {
		p.DockerSockets = slices.Clone(c.Policy.DockerSockets)
	}
	p.Memory, p.CPUs, p.Pids, p.EgressOff = c.Policy.Memory, c.Policy.CPUs, c.Policy.Pids, c.Policy.EgressOff
	p.Egress, p.EgressResolver = slices.Clone(c.Policy.Egress), c.Policy.EgressResolver
	if req.Policy != nil && len(req.Policy.Egress) > 0 {
		if err := c.narrowEgress(req.Policy.Egress, &p, beyond); err != nil {
			return err
		}
	}
	if req.Policy != nil {
		for i, kind := range req.Policy.Allow {
			if err := p.Allow(kind); err != nil {
				return invalid(fmt.Sprintf("init task: policy.allow: %v", err))
			}
			if !slices.Contains(c.Policy.Allowed(), kind) {
				beyond(fmt.Sprintf("policy.allow[%d]", i), kind, "an opt-in this server does not let requests ask for", "--allow "+kind)
			}
		}
		for i, capability := range req.Policy.AllowCapabilities {
			norm := compose.NormalizeCap(capability)
			if norm == "" {
				return invalid("init task: policy.allow_capabilities: empty capability")
			}
			if !c.allowsCap(norm) {
				beyond(fmt.Sprintf("policy.allow_capabilities[%d]", i), capability, "a capability this server does not let requests ask for", "--allow-cap "+norm)
			}
			if !slices.Contains(p.AllowCapabilities, norm) {
				p.AllowCapabilities = append(p.AllowCapabilities, norm)
			}
		}
		for i, root := range req.Policy.AllowedMountRoots {
			if !filepath.IsAbs(root) {
				return invalid(fmt.Sprintf("init task: policy.allowed_mount_roots: %q is not an absolute path", root))
			}
			resolved := compose.ResolvePath(root)
			if !c.allowsRoot(resolved) {
				beyond(fmt.Sprintf("policy.allowed_mount_roots[%d]", i), root, "a mount root outside the ones this server lets requests name", "--allow-mount-root "+resolved)
			}
			// The root as it resolves now: a symlink swapped in later does not move it.
			p.AllowedMountRoots = append(p.AllowedMountRoots, resolved)
		}
	}
	spec.Policy = &p

	for i, name := range req.PassEnv {
		if !slices.Contains(c.PassEnv, name) {
			beyond(fmt.Sprintf("pass_env[%d]", i), name, "a variable of the server's environment it does not pass to requests", "--pass-env "+name)
		}
	}
	spec.PassEnv = req.PassEnv

	// Host paths: a working_dir only within the task roots; path and files within them when
	// there are any; none in a directory of keys.
	if req.WorkingDir != "" {
		resolved, v := c.taskPath("working_dir", req.WorkingDir, true)
		if v != nil {
			out = append(out, *v)
		}
		// The directory as it resolves now: a symlink swapped in later does not move it.
		spec.WorkingDir = resolved
	}
	if req.Path != "" {
		if _, v := c.taskPath("path", req.Path, false); v != nil {
			out = append(out, *v)
		}
	}
	for i, f := range req.Files {
		if _, v := c.taskPath(fmt.Sprintf("files[%d]", i), f, false); v != nil {
			out = append(out, *v)
		}
	}
	if len(out) > 0 {
		return &compose.PolicyError{Op: "init task", Violations: out}
	}
	return nil
}

// allowsCap reports whether the ceiling lets a request ask for a capability (normalised):
// one of its own, any with ALL, or one of Docker's default set, which grants nothing.
func (c Ceiling) allowsCap(norm string) bool {
	if norm != "ALL" && slices.Contains(compose.DefaultCapabilities(), norm) {
		return true
	}
	return slices.ContainsFunc(c.Policy.AllowCapabilities, func(a string) bool {
		a = compose.NormalizeCap(a)
		return a == "ALL" || a == norm
	})
}

// allowsRoot reports whether a resolved mount root lies within the ceiling's, or the ceiling
// allows host paths from anywhere.
func (c Ceiling) allowsRoot(resolved string) bool {
	if c.Policy.AllowAnyMount {
		return true
	}
	return slices.ContainsFunc(c.Policy.AllowedMountRoots, func(r string) bool {
		return compose.Within(resolved, compose.ResolvePath(filepath.Clean(r)))
	})
}

// taskPath checks a host path a request names for its task (working_dir, path, files) and
// returns it resolved. A working_dir (dir) must lie within a task root and be one a task may
// bind from; a compose file only within the task roots when there are any.
func (c Ceiling) taskPath(field, p string, dir bool) (string, *compose.Violation) {
	resolved := compose.ResolvePath(filepath.Clean(p))
	refuse := func(why, optIn string) (string, *compose.Violation) {
		if optIn != "" {
			optIn = "composebox serve " + optIn
		}
		return resolved, &compose.Violation{Field: field, Value: p, Rule: "task-root", Why: why, OptIn: optIn}
	}
	if why := c.credentials(resolved, dir); why != "" {
		return refuse(why, "")
	}
	if dir {
		if why := compose.RefusedRoot(resolved); why != "" {
			return refuse("no task directory can be here: "+why, "")
		}
	}
	if len(c.TaskRoots) == 0 && !dir {
		return resolved, nil
	}
	for _, root := range c.TaskRoots {
		if compose.Within(resolved, compose.ResolvePath(filepath.Clean(root))) {
			return resolved, nil
		}
	}
	suggest := resolved
	if !dir {
		suggest = filepath.Dir(resolved)
	}
	why := "outside the server's task roots"
	if len(c.TaskRoots) == 0 {
		why = "outside the server's task roots (it has none)"
	}
	return refuse(why, "--task-root "+suggest)
}

// serverOptIns rewrites the opt-ins of a policy error from the compose checks into what a
// client of this server does: ask for it in the request's policy, within the ceiling, or have
// the operator raise the ceiling first. Other errors come back as they are.
func (c Ceiling) serverOptIns(err error) error {
	var pe *compose.PolicyError
	if !errors.As(err, &pe) {
		return err
	}
	out := &compose.PolicyError{Op: pe.Op, Violations: slices.Clone(pe.Violations)}
	for i, v := range out.Violations {
		if !v.Invalid && v.Rule != ceilingRule && v.OptIn != "" {
			out.Violations[i].OptIn = c.serverOptIn(v.OptIn)
		}
	}
	// The wrapping layers wrote their messages with the original's: replace it in the text.
	return &rewritten{msg: strings.Replace(err.Error(), pe.Error(), out.Error(), 1), err: out}
}

// rewritten is an error whose innermost policy error was rewritten for a server's client.
type rewritten struct {
	msg string
	err error
}

func (e *rewritten) Error() string { return e.msg }
func (e *rewritten) Unwrap() error { return e.err }

func (c Ceiling) serverOptIn(optIn string) string {
	switch {
	case strings.HasPrefix(optIn, "--allow-cap "):
		name := strings.TrimPrefix(optIn, "--allow-cap ")
		ask := fmt.Sprintf(`"policy": {"allow_capabilities": [%q]} in the request`, name)
		if c.allowsCap(compose.NormalizeCap(name)) {
			return ask
		}
		return "composebox serve " + optIn + ", then " + ask
	case strings.HasPrefix(optIn, "--allow-mount-root "):
		return `"policy": {"allowed_mount_roots": [DIR]} in the request, within composebox serve --allow-mount-root DIR`
	case strings.HasPrefix(optIn, "--allow "):
		kind := strings.TrimPrefix(optIn, "--allow ")
		if strings.ContainsAny(kind, " ,") {
			return optIn
		}
		ask := fmt.Sprintf(`"policy": {"allow": [%q]} in the request`, kind)
		if slices.Contains(c.Policy.Allowed(), kind) {
			return ask
		}
		return "composebox serve " + optIn + ", then " + ask
	}
	return optIn
}
