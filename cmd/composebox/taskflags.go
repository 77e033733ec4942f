package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/spf13/pflag"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/egressgw"
	"github.com/composebox/composebox/orchestrator"
)

// taskFlags are the flags config, doctor, up and run share: how a task's project is found and
// tailored (as a runner passes them: the files, profiles, sample metadata, the default service,
// an agent service and image replacements), the security policy its files must pass, and the
// variables their interpolation may read. Nothing else of composebox's own environment reaches a
// compose file.
type taskFlags struct {
	Files      []string
	Profiles   []string
	Metadata   []string
	Default    string
	AgentImage string
	// ServiceImages are --service-image SERVICE=REF values.
	ServiceImages []string
	// Images are --image values: run's one-shot IMG, or (deprecated) SERVICE=REF as
	// --service-image takes it.
	Images []string

	Allow      []string
	AllowCaps  []string
	MountRoots []string
	PolicyFile string
	Egress     []string
	EgressDNS  string
	// Vars are --var KEY=VAL, the interpolation variables.
	Vars []string
	// Env is -e/--env: the deprecated spelling of --var, except on run --image, where it is the
	// container's environment as on exec.
	Env      []string
	EnvFiles []string
	PassEnv  []string
}

func (f *taskFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&f.Files, "file", "f", nil, "compose file (repeatable, merged in order; the first stands for PATH when none is given)")
	fs.StringArrayVar(&f.Profiles, "profile", nil, "compose profile to enable (repeatable)")
	fs.StringArrayVar(&f.Metadata, "metadata", nil, "sample metadata KEY=VAL, interpolated as ${SAMPLE_METADATA_KEY} (repeatable)")
	fs.StringVar(&f.Default, "default", "", "the default service, over every other rule")
	fs.StringVar(&f.AgentImage, "agent-image", "", "add a service \"default\" on this image, on every network of the project, as the agent's container")
	fs.StringArrayVar(&f.ServiceImages, "service-image", nil, "run SERVICE on image REF instead of its own (SERVICE=REF; a build is then skipped; repeatable)")
	fs.StringArrayVar(&f.Images, "image", nil, "deprecated: use --service-image SERVICE=REF")
	f.registerPolicy(fs)
	fs.StringArrayVar(&f.Vars, "var", nil, "variable KEY=VAL for the compose file's interpolation (repeatable)")
	fs.StringArrayVarP(&f.Env, "env", "e", nil, "deprecated: use --var KEY=VAL (-e is the container's environment on exec and run --image)")
	fs.StringArrayVar(&f.EnvFiles, "env-file", nil, "file of KEY=VAL variables for interpolation (repeatable; --var wins)")
	fs.StringArrayVar(&f.PassEnv, "pass-env", nil, "let interpolation read this variable of composebox's environment (repeatable)")
}

// path is the task path: PATH, else the first -f file (the others are merged on top of it).
func (f *taskFlags) path(arg string) (string, []string) {
	if arg == "" && len(f.Files) > 0 {
		return f.Files[0], f.Files[1:]
	}
	return arg, f.Files
}

// specs fill a task spec from the flags and PATH (with the policy and the variables, as apply
// does), and the spec of its sample (the metadata).
func (f *taskFlags) specs(name, arg string) (orchestrator.TaskSpec, orchestrator.SampleSpec, error) {
	path, files := f.path(arg)
	overrides, err := f.overrides()
	if err != nil {
		return orchestrator.TaskSpec{}, orchestrator.SampleSpec{}, err
	}
	md, err := f.metadata()
	if err != nil {
		return orchestrator.TaskSpec{}, orchestrator.SampleSpec{}, err
	}
	spec := orchestrator.TaskSpec{
		Name:           name,
		Path:           path,
		Files:          files,
		Profiles:       f.Profiles,
		DefaultService: f.Default,
		AgentImage:     f.AgentImage,
		ImageOverrides: overrides,
	}
	if err := f.apply(&spec); err != nil {
		return orchestrator.TaskSpec{}, orchestrator.SampleSpec{}, err
	}
	return spec, orchestrator.SampleSpec{Metadata: md}, nil
}

// overrides parses --service-image SERVICE=REF, and the deprecated --image SERVICE=REF.
func (f *taskFlags) overrides() (map[string]string, error) {
	flag, vals := "--service-image", f.ServiceImages
	if len(f.Images) > 0 {
		flag, vals = "--service-image (or --image)", append(slices.Clone(f.ServiceImages), f.Images...)
	}
	out, err := parsePairs(flag, "SERVICE=REF", vals)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// metadata parses --metadata KEY=VAL.
func (f *taskFlags) metadata() (map[string]string, error) {
	return parsePairs("--metadata", "KEY=VAL", f.Metadata)
}

func parsePairs(flag, form string, vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range vals {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usageError{fmt.Errorf("%s %q: want %s", flag, kv, form)}
		}
		if _, dup := out[k]; dup {
			return nil, usageError{fmt.Errorf("%s %q: %s given twice", flag, kv, k)}
		}
		out[k] = v
	}
	return out, nil
}

// loadOptions are the flags as compose.LoadOptions, for config: the variables, the policy and
// what tailors the task.
func (f *taskFlags) loadOptions() (compose.LoadOptions, error) {
	spec, sample, err := f.specs("", "")
	if err != nil {
		return compose.LoadOptions{}, err
	}
	return compose.LoadOptions{
		Environment:    spec.Environment,
		PassEnv:        spec.PassEnv,
		Policy:         spec.Policy,
		Profiles:       spec.Profiles,
		Metadata:       sample.Metadata,
		DefaultService: spec.DefaultService,
		AgentImage:     spec.AgentImage,
		ImageOverrides: spec.ImageOverrides,
	}, nil
}

// registerPolicy registers the policy flags (doctor shows the policy they make).
func (f *taskFlags) registerPolicy(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.Allow, "allow", nil, "opt in to KIND, denied by default (repeatable): "+strings.Join(compose.AllowKinds(), ", "))
	fs.StringArrayVar(&f.AllowCaps, "allow-cap", nil, "allow this capability in cap_add beyond Docker's default set (repeatable; ALL for any)")
	fs.StringArrayVar(&f.MountRoots, "allow-mount-root", nil, "let host paths come from DIR too, besides the task directory (repeatable)")
	fs.StringVar(&f.PolicyFile, "policy", "", "policy file (YAML, the fields of compose.Policy); the flags add to it")
	fs.StringArrayVar(&f.Egress, "egress", nil, "let every service reach only NAME[:PORT] (repeatable; *.example.com for subdomains; ports 80 and 443 by default); x-egress in the compose file narrows a service's list")
	fs.StringVar(&f.EgressDNS, "egress-resolver", "", "resolver ADDR[:PORT] the egress gateway resolves allowed names through (default: the engine host's)")
}

// policy is the policy the flags ask for: the file's (else the default), with the opt-ins,
// capabilities and roots of the flags added.
func (f *taskFlags) policy() (compose.Policy, error) {
	p := compose.DefaultPolicy()
	if f.PolicyFile != "" {
		var err error
		if p, err = compose.ReadPolicyFile(f.PolicyFile); err != nil {
			return p, err
		}
	}
	for _, kind := range f.Allow {
		if err := p.Allow(kind); err != nil {
			return p, usageError{fmt.Errorf("--allow: %w", err)}
		}
	}
	for _, c := range f.AllowCaps {
		if strings.TrimSpace(c) == "" {
			return p, usageError{errUsage("--allow-cap: empty capability")}
		}
		if !slices.Contains(p.AllowCapabilities, c) {
			p.AllowCapabilities = append(p.AllowCapabilities, c)
		}
	}
	for _, r := range f.MountRoots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return p, usageError{fmt.Errorf("--allow-mount-root %s: %w", r, err)}
		}
		p.AllowedMountRoots = append(p.AllowedMountRoots, abs)
	}
	for _, e := range f.Egress {
		if _, err := egressgw.ParseRule(e); err != nil {
			return p, usageError{fmt.Errorf("--egress: %w", err)}
		}
		if !slices.Contains(p.Egress, e) {
			p.Egress = append(p.Egress, e)
		}
	}
	if f.EgressDNS != "" {
		p.EgressResolver = f.EgressDNS
	}
	return p, nil
}

// deprecations are the warnings of the old spellings used: -e for interpolation (oneShot is
// run --image, where -e is the container's environment) and --image SERVICE=REF.
func (f *taskFlags) deprecations(oneShot bool) []string {
	var out []string
	if len(f.Env) > 0 && !oneShot {
		out = append(out, "-e/--env for interpolation is deprecated: use --var KEY=VAL (-e is the container's environment on exec)")
	}
	for _, v := range f.Images {
		if strings.Contains(v, "=") {
			out = append(out, "--image SERVICE=REF is deprecated: use --service-image SERVICE=REF (run --image IMG stays the one-shot image)")
			break
		}
	}
	return out
}

// environment is the interpolation variables of --env-file, -e and --var, in that order.
func (f *taskFlags) environment() (map[string]string, error) {
	env := map[string]string{}
	for _, file := range f.EnvFiles {
		vars, err := dotenv.GetEnvFromFile(env, []string{file})
		if err != nil {
			return nil, usageError{fmt.Errorf("--env-file %s: %w", file, err)}
		}
		for k, v := range vars {
			env[k] = v
		}
	}
	for _, set := range []struct {
		flag string
		vals []string
	}{{"-e", f.Env}, {"--var", f.Vars}} {
		for _, kv := range set.vals {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, usageError{fmt.Errorf("%s %q: want KEY=VAL", set.flag, kv)}
			}
			env[k] = v
		}
	}
	return env, nil
}

// apply fills a task spec's variables and policy from the flags.
func (f *taskFlags) apply(spec *orchestrator.TaskSpec) error {
	env, err := f.environment()
	if err != nil {
		return err
	}
	p, err := f.policy()
	if err != nil {
		return err
	}
	spec.Environment, spec.PassEnv, spec.Policy = env, f.PassEnv, &p
	return nil
}

// orchestratorPolicy is the policy as an orchestrator option, for what runs outside a task
// spec (run --image).
func (f *taskFlags) orchestratorPolicy() (orchestrator.Option, error) {
	p, err := f.policy()
	if err != nil {
		return nil, err
	}
	return orchestrator.WithPolicy(p), nil
}
