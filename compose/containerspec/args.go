package containerspec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/errdefs"
)

// Extra `docker run` args of a Spec. They come from configuration that may
// be untrusted, so they are checked twice: first against a blocklist of flags that
// weaken isolation, scanning every argument (a value that looks like a blocked flag is blocked
// too), then parsed against a short list of flags composebox knows how to express in a compose
// service. A flag outside that list is an error, never passed through: there is no
// `docker run` command line to pass it to.

// blockedHostFlags take a value and are blocked when it is "host".
var blockedHostFlags = []string{"--pid", "--network", "--net", "--ipc", "--uts", "--userns", "--cgroupns"}

// CheckExtraArgs rejects the blocked flags, before anything starts:
// --privileged, -v/--volume and --mount in every form, and --pid, --network, --ipc and --uts
// set to host, and --cap-add=ALL, both as --flag=value and as --flag value. The error is an
// errdefs.ErrPolicyViolation that says, for each, '<flag>' is blocked by sandbox policy.
func CheckExtraArgs(args []string) error {
	var blocked []string
	for i, a := range args {
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		if flag, ok := blockedArg(a, next); ok {
			blocked = append(blocked, fmt.Sprintf("'%s' is blocked by sandbox policy", flag))
		}
	}
	if len(blocked) == 0 {
		return nil
	}
	return errdefs.New(errdefs.ErrPolicyViolation, "check extra run args: "+strings.Join(blocked, "; "))
}

// blockedArg reports whether a (with next, for the split form) is a blocked flag, and the flag
// as written.
func blockedArg(a, next string) (string, bool) {
	name, val, hasVal := strings.Cut(a, "=")
	switch {
	case name == "--privileged":
		return a, true
	case name == "-v", name == "--volume", name == "--mount":
		return a, true
	case strings.HasPrefix(a, "-v") && !strings.HasPrefix(a, "--"):
		return a, true // -v/host:/container, the value attached
	}
	valueIs := func(want func(string) bool) (string, bool) {
		if hasVal {
			return a, want(val)
		}
		return a + " " + next, want(next)
	}
	switch {
	case slices.Contains(blockedHostFlags, name):
		return valueIs(compose.IsHost)
	case name == "--cap-add":
		return valueIs(func(v string) bool { return compose.NormalizeCap(v) == "ALL" })
	}
	return "", false
}

// runArgs is what the supported extra args set.
type runArgs struct {
	env         map[string]string
	capAdd      []string
	capDrop     []string
	readOnly    bool
	tmpfs       []string
	shmSize     types.UnitBytes
	ulimits     map[string]*types.UlimitsConfig
	securityOpt []string
	hostname    string
	dns         []string
	extraHosts  types.HostsList
	sysctls     types.Mapping
	groupAdd    []string
	entrypoint  []string
	labels      map[string]string
	ipc         string
	stopGrace   *types.Duration
}

// runFlag is one supported flag: whether it takes a value, and what it sets.
type runFlag struct {
	value bool
	set   func(a *runArgs, name, val string) error
}

// typedFlags have a Spec field of their own, which is where they belong.
var typedFlags = map[string]string{
	"--memory": "MemoryMB", "-m": "MemoryMB", "--cpus": "CPUs", "--pids-limit": "Pids",
	"--user": "User (or HostUser)", "-u": "User (or HostUser)", "--workdir": "Workdir", "-w": "Workdir",
	"--network": "Network", "--net": "Network", "--publish": "Ports", "-p": "Ports",
	"--env-file": "Env",
}

var runFlags = map[string]runFlag{
	"--env":          {value: true, set: setEnv},
	"-e":             {value: true, set: setEnv},
	"--cap-add":      {value: true, set: func(a *runArgs, _, v string) error { a.capAdd = append(a.capAdd, v); return nil }},
	"--cap-drop":     {value: true, set: func(a *runArgs, _, v string) error { a.capDrop = append(a.capDrop, v); return nil }},
	"--read-only":    {set: func(a *runArgs, n, v string) error { return setBool(&a.readOnly, n, v) }},
	"--tmpfs":        {value: true, set: func(a *runArgs, _, v string) error { a.tmpfs = append(a.tmpfs, v); return nil }},
	"--shm-size":     {value: true, set: setShmSize},
	"--ulimit":       {value: true, set: setUlimit},
	"--security-opt": {value: true, set: func(a *runArgs, _, v string) error { a.securityOpt = append(a.securityOpt, v); return nil }},
	"--hostname":     {value: true, set: func(a *runArgs, _, v string) error { a.hostname = v; return nil }},
	"-h":             {value: true, set: func(a *runArgs, _, v string) error { a.hostname = v; return nil }},
	"--dns":          {value: true, set: func(a *runArgs, _, v string) error { a.dns = append(a.dns, v); return nil }},
	"--add-host":     {value: true, set: setAddHost},
	"--sysctl":       {value: true, set: setSysctl},
	"--group-add":    {value: true, set: func(a *runArgs, _, v string) error { a.groupAdd = append(a.groupAdd, v); return nil }},
	"--entrypoint":   {value: true, set: setEntrypoint},
	"--label":        {value: true, set: setLabel},
	"-l":             {value: true, set: setLabel},
	"--ipc":          {value: true, set: setIpc},
	"--stop-timeout": {value: true, set: setStopTimeout},
	// Always on in composebox: accepted so that harness configs carrying them still work.
	"--init": {set: func(_ *runArgs, n, v string) error { var b bool; return setBool(&b, n, v) }},
	"--rm":   {set: func(_ *runArgs, n, v string) error { var b bool; return setBool(&b, n, v) }},
}

// SupportedExtraArgs lists the extra run args a Spec accepts, sorted.
func SupportedExtraArgs() []string {
	var out []string
	for name := range runFlags {
		if strings.HasPrefix(name, "--") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// parseRunArgs parses the supported flags: --flag value, --flag=value, -f value and -fvalue.
func parseRunArgs(args []string) (runArgs, error) {
	var a runArgs
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" {
			return a, invalid("extra run arg %q is not a flag (the image and the command are not extra args)", arg)
		}
		name, val, hasVal := arg, "", false
		if strings.HasPrefix(arg, "--") {
			name, val, hasVal = strings.Cut(arg, "=")
		} else if len(arg) > 2 {
			name, val, hasVal = arg[:2], strings.TrimPrefix(arg[2:], "="), true
		}
		if field, ok := typedFlags[name]; ok {
			return a, invalid("extra run arg %q: set the spec's %s instead", arg, field)
		}
		f, ok := runFlags[name]
		if !ok {
			return a, invalid("extra run arg %q is not supported (supported: %s)", name, strings.Join(SupportedExtraArgs(), ", "))
		}
		if f.value && !hasVal {
			if i+1 >= len(args) {
				return a, invalid("extra run arg %s: needs a value", name)
			}
			i++
			val = args[i]
		}
		if err := f.set(&a, name, val); err != nil {
			return a, err
		}
	}
	return a, nil
}

// apply puts the parsed flags on the service.
func (a runArgs) apply(svc *types.ServiceConfig) {
	svc.CapAdd = append(svc.CapAdd, a.capAdd...)
	svc.CapDrop = append(svc.CapDrop, a.capDrop...)
	svc.ReadOnly = svc.ReadOnly || a.readOnly
	svc.Tmpfs = append(svc.Tmpfs, a.tmpfs...)
	if a.shmSize > 0 {
		svc.ShmSize = a.shmSize
	}
	if len(a.ulimits) > 0 {
		svc.Ulimits = a.ulimits
	}
	svc.SecurityOpt = append(svc.SecurityOpt, a.securityOpt...)
	if a.hostname != "" {
		svc.Hostname = a.hostname
	}
	svc.DNS = append(svc.DNS, a.dns...)
	if len(a.extraHosts) > 0 {
		svc.ExtraHosts = a.extraHosts
	}
	if len(a.sysctls) > 0 {
		svc.Sysctls = a.sysctls
	}
	svc.GroupAdd = append(svc.GroupAdd, a.groupAdd...)
	if a.entrypoint != nil {
		svc.Entrypoint = types.ShellCommand(a.entrypoint)
	}
	if len(a.labels) > 0 {
		svc.Labels = types.Labels{}
		for k, v := range a.labels {
			svc.Labels[k] = v
		}
	}
	if a.ipc != "" {
		svc.Ipc = a.ipc
	}
	if a.stopGrace != nil {
		svc.StopGracePeriod = a.stopGrace
	}
}

func setBool(dst *bool, name, v string) error {
	if v == "" {
		*dst = true
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return invalid("extra run arg %s=%s: want true or false", name, v)
	}
	*dst = b
	return nil
}

func setEnv(a *runArgs, name, v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		// docker would copy the host's value; a sandbox spec says what it passes.
		return invalid("extra run arg %s %q: want KEY=VALUE", name, v)
	}
	if a.env == nil {
		a.env = map[string]string{}
	}
	a.env[k] = val
	return nil
}

func setShmSize(a *runArgs, name, v string) error {
	var b types.UnitBytes
	if err := b.DecodeMapstructure(v); err != nil || b <= 0 {
		return invalid("extra run arg %s %q: want a size such as 64m", name, v)
	}
	a.shmSize = b
	return nil
}

func setUlimit(a *runArgs, name, v string) error {
	key, limits, ok := strings.Cut(v, "=")
	soft, hard, twoValues := strings.Cut(limits, ":")
	s, err1 := strconv.Atoi(soft)
	h, err2 := s, error(nil)
	if twoValues {
		h, err2 = strconv.Atoi(hard)
	}
	if !ok || key == "" || err1 != nil || err2 != nil {
		return invalid("extra run arg %s %q: want NAME=SOFT[:HARD]", name, v)
	}
	if a.ulimits == nil {
		a.ulimits = map[string]*types.UlimitsConfig{}
	}
	if twoValues {
		a.ulimits[key] = &types.UlimitsConfig{Soft: s, Hard: h}
	} else {
		a.ulimits[key] = &types.UlimitsConfig{Single: s}
	}
	return nil
}

func setAddHost(a *runArgs, name, v string) error {
	host, ip, ok := strings.Cut(v, "=")
	if !ok {
		host, ip, ok = strings.Cut(v, ":")
	}
	if !ok || host == "" || ip == "" {
		return invalid("extra run arg %s %q: want HOST:IP", name, v)
	}
	if a.extraHosts == nil {
		a.extraHosts = types.HostsList{}
	}
	a.extraHosts[host] = append(a.extraHosts[host], ip)
	return nil
}

func setSysctl(a *runArgs, name, v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return invalid("extra run arg %s %q: want KEY=VALUE", name, v)
	}
	if a.sysctls == nil {
		a.sysctls = types.Mapping{}
	}
	a.sysctls[k] = val
	return nil
}

func setEntrypoint(a *runArgs, name, v string) error {
	if v == "" {
		return invalid("extra run arg %s: want a program", name)
	}
	a.entrypoint = []string{v}
	return nil
}

func setLabel(a *runArgs, name, v string) error {
	k, val, _ := strings.Cut(v, "=")
	if k == "" {
		return invalid("extra run arg %s %q: want KEY[=VALUE]", name, v)
	}
	if a.labels == nil {
		a.labels = map[string]string{}
	}
	a.labels[k] = val
	return nil
}

func setIpc(a *runArgs, name, v string) error {
	switch v {
	case "private", "none", "shareable":
		a.ipc = v
		return nil
	}
	return invalid("extra run arg %s %q: want private, none or shareable", name, v)
}

func setStopTimeout(a *runArgs, name, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return invalid("extra run arg %s %q: want seconds", name, v)
	}
	d := types.Duration(time.Duration(n) * time.Second)
	a.stopGrace = &d
	return nil
}
