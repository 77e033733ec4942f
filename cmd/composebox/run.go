package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/spf13/cobra"

	"github.com/composebox/composebox/orchestrator"
)

type runOptions struct {
	Task    string
	Timeout time.Duration
	Ready   time.Duration
	Reaper  bool

	// The one-shot single-container form, selected by --image.
	Image     string
	Memory    string
	CPUs      float64
	Pids      int64
	Network   string
	Mounts    []string
	Workspace string
	Workdir   string
	User      string
	HostUser  bool

	flags taskFlags // -e is the container's environment with --image
}

// imageOnlyFlags make sense only with --image.
var imageOnlyFlags = []string{"memory", "cpus", "pids", "network", "mount", "workspace", "workdir", "user", "host-user"}

func newRunCmd(g *globals) *cobra.Command {
	var opts runOptions
	cmd := &cobra.Command{
		Use:   "run [PATH | --image IMG] [flags] -- CMD [ARG...]",
		Short: "Start a sample (or one container), run a command in it, and remove it",
		Long: `Up, exec and down in one go: starts one sample of PATH (as 'up' does), runs CMD in the default
service with its output streamed, removes the sample (also on Ctrl-C), and exits with CMD's code.

With --image, runs CMD once in a fresh container of IMG instead (create, exec, remove, as
docker run --rm does), with no network unless --network bridge, the given limits, and
--workspace HOSTDIR bind-mounted read-write at the workdir (default /workspace), so that the
command's file edits land on the host. IMG must be present locally: composebox never pulls.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, argv := "", args
			if n := cmd.ArgsLenAtDash(); n == 1 {
				path, argv = args[0], args[1:]
			} else if n > 1 {
				return usageError{errUsage("run: at most one PATH before --")}
			}
			if len(argv) == 0 {
				return usageError{errUsage("run: no command after --")}
			}
			img, err := opts.oneShotImage()
			if err != nil {
				return err
			}
			opts.Image = img
			g.warnDeprecated(cmd, opts.flags.deprecations(img != "")...)
			if opts.Image == "" {
				for _, f := range imageOnlyFlags {
					if cmd.Flags().Changed(f) {
						return usageError{fmt.Errorf("run: --%s needs --image", f)}
					}
				}
				return runRun(cmd.Context(), g, path, argv, opts)
			}
			if path != "" || len(opts.flags.Files) > 0 {
				return usageError{errUsage("run: give either PATH (or -f) or --image IMG, not both")}
			}
			for _, f := range []string{"env-file", "pass-env", "var"} {
				if cmd.Flags().Changed(f) {
					return usageError{fmt.Errorf("run: --%s is for a compose file's interpolation, not --image (use -e for the container's environment)", f)}
				}
			}
			spec, err := opts.containerSpec()
			if err != nil {
				return usageError{err}
			}
			return runImage(cmd.Context(), g, spec, argv, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Task, "task", "", "task name (default: the directory's name; with --image, \"container\")")
	secondsVar(f, &opts.Timeout, "timeout", 0, "kill the command after this long, e.g. 30s or 30 (exit 124)")
	secondsVar(f, &opts.Ready, "wait-timeout", 0, "readiness budget, e.g. 2m or 120 (default: derived from the healthchecks)")
	secondsVar(f, &opts.Ready, "ready-timeout", 0, "")
	deprecate(f, "ready-timeout", "--wait-timeout")
	f.BoolVar(&opts.Reaper, "reaper", false, "start a watchdog that removes the sample if composebox dies without cleaning up")
	f.StringVar(&opts.Memory, "memory", "", "with --image: memory limit, e.g. 512m or 1g")
	f.Float64Var(&opts.CPUs, "cpus", 0, "with --image: CPU limit, e.g. 1 or 0.5")
	f.Int64Var(&opts.Pids, "pids", 0, "with --image: limit on the number of processes")
	f.StringVar(&opts.Network, "network", "none", "with --image: none or bridge (host only where the policy allows it)")
	f.StringArrayVar(&opts.Mounts, "mount", nil, "with --image: bind mount HOST:CTR[:ro] (repeatable; relative HOST: against --workspace)")
	f.StringVar(&opts.Workspace, "workspace", "", "with --image: host directory mounted read-write at the workdir")
	f.StringVar(&opts.Workdir, "workdir", "", "with --image: working directory in the container (default /workspace)")
	f.StringVarP(&opts.User, "user", "u", "", "with --image: user, a name or uid[:gid]")
	f.BoolVar(&opts.HostUser, "host-user", false, "with --image: run as this process's uid:gid, so files in the workspace stay yours")
	opts.flags.register(f)
	f.Lookup("image").Usage = "run CMD once in a fresh container of this local image IMG instead of a project (SERVICE=REF: deprecated, use --service-image)"
	f.Lookup("env").Usage = "with --image: the container's variable KEY=VAL, as on exec (repeatable; for a project's interpolation it is the deprecated spelling of --var)"
	return cmd
}

func runRun(ctx context.Context, g *globals, path string, argv []string, opts runOptions) (err error) {
	o, err := g.orchestrator(opts.Reaper)
	if err != nil {
		return err
	}
	defer o.Close()
	spec, sspec, err := opts.flags.specs(opts.Task, path)
	if err != nil {
		return err
	}
	spec.ReadyTimeout = opts.Ready
	g.progress.building()
	task, err := o.TaskInit(ctx, spec)
	if err != nil {
		return err
	}
	g.progress.starting(task)
	// Task.Cleanup removes the sample too, on a detached context: Ctrl-C still cleans up.
	defer func() {
		if cerr := task.Cleanup(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	sample, err := task.SampleInit(ctx, sspec)
	if err != nil {
		return err
	}
	req := orchestrator.ExecRequest{Cmd: argv, Timeout: opts.Timeout}
	if g.JSON {
		// The output is part of the one JSON document, so it is collected, not streamed.
		res, err := sample.Default().Exec(ctx, req)
		return g.execOutcomeOf(sample.Project(), res, err, false)
	}
	return g.streamExec(ctx, sample.Default(), req)
}

// oneShotImage is run's --image IMG, the one-shot single-container form; a --image SERVICE=REF
// is the deprecated spelling of --service-image, for PATH's project. An image reference never
// holds '='.
func (opts runOptions) oneShotImage() (string, error) {
	var lone, pairs []string
	for _, v := range opts.flags.Images {
		if strings.Contains(v, "=") {
			pairs = append(pairs, v)
		} else {
			lone = append(lone, v)
		}
	}
	switch {
	case len(lone) == 0:
		return "", nil
	case len(lone) > 1 || len(pairs) > 0:
		return "", usageError{fmt.Errorf("run: --image takes one IMG (a one-shot container), not %s (a service's image is --service-image SERVICE=REF)",
			strings.Join(opts.flags.Images, " and "))}
	case len(opts.flags.ServiceImages) > 0:
		return "", usageError{fmt.Errorf("run: --service-image applies to a compose project, not to --image %s", lone[0])}
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"--default", opts.flags.Default != ""}, {"--agent-image", opts.flags.AgentImage != ""},
		{"--profile", len(opts.flags.Profiles) > 0}, {"--metadata", len(opts.flags.Metadata) > 0},
	} {
		if f.set {
			return "", usageError{fmt.Errorf("run: %s applies to a compose project, not to --image %s", f.name, lone[0])}
		}
	}
	return lone[0], nil
}

// containerSpec turns the --image flags into a spec.
func (opts runOptions) containerSpec() (orchestrator.ContainerSpec, error) {
	spec := orchestrator.ContainerSpec{
		Name: opts.Task, Image: opts.Image, CPUs: opts.CPUs, Pids: opts.Pids, Network: opts.Network,
		Workspace: opts.Workspace, Workdir: opts.Workdir, User: opts.User,
	}
	if opts.Memory != "" {
		var b types.UnitBytes
		if err := b.DecodeMapstructure(opts.Memory); err != nil || b <= 0 {
			return spec, fmt.Errorf("run: --memory %q: want a size such as 512m or 1g", opts.Memory)
		}
		spec.MemoryMB = (int64(b) + 1<<20 - 1) >> 20
	}
	for _, m := range opts.Mounts {
		mount, err := orchestrator.ParseMount(m)
		if err != nil {
			return spec, fmt.Errorf("run: --mount: %w", err)
		}
		spec.Mounts = append(spec.Mounts, mount)
	}
	for _, kv := range opts.flags.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return spec, fmt.Errorf("run: -e %q: want K=V", kv)
		}
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		spec.Env[k] = v
	}
	if opts.HostUser {
		hu := orchestrator.CurrentHostUser()
		spec.HostUser = &hu
	}
	return spec, nil
}

// runImage is the one-shot form: Orchestrator.Run, with the output streamed (or, with --json,
// printed as exec's JSON) and the command's exit code passed through.
func runImage(ctx context.Context, g *globals, spec orchestrator.ContainerSpec, argv []string, opts runOptions) error {
	policy, err := opts.flags.orchestratorPolicy()
	if err != nil {
		return err
	}
	o, err := g.orchestrator(opts.Reaper, policy)
	if err != nil {
		return err
	}
	defer o.Close()
	ropts := orchestrator.RunOptions{Timeout: opts.Timeout, SpawnOptions: orchestrator.SpawnOptions{ReadyTimeout: opts.Ready}}
	if !g.JSON {
		ropts.Stdout, ropts.Stderr = g.stdout, g.stderr
	}
	res, err := o.Run(ctx, spec, argv, ropts)
	if err != nil && res.Project == "" {
		return err // nothing ran: the spec, the policy, the image or the start failed
	}
	return g.execOutcomeOf(res.Project, res.ExecResult, err, !g.JSON)
}
