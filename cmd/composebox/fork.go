package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator"
)

type forkOptions struct {
	Project string
	N       int
	Task    string
	flags   taskFlags
}

func newForkCmd(g *globals) *cobra.Command {
	var opts forkOptions
	cmd := &cobra.Command{
		Use:   "fork -p PROJECT [-n N] [PATH]",
		Short: "Start N copies of a live sample, each in networks of its own",
		Long: `Copies the live sample PROJECT N times (default 1) at one moment: every service's files and every
named volume's content, with the same services, environment, working directories and published-
port rules. The sample is paused only for the cut (about a second, more with large volumes) and
runs on untouched. Processes are not copied: each copy starts its services afresh and is waited
for as 'up' waits. Each copy has its own networks, where the service names resolve to its own
containers, and is left running like a sample of 'up': remove it with 'composebox down'. Prints
one new project per line.

The task is loaded again from the compose files the sample's labels name, under its task name;
give PATH (and the flags 'up' was given) when they cannot be found again, or to start the copies
with other variables or policy.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			return runFork(cmd, g, path, opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Project, "project", "p", "", "the sample's project name")
	f.IntVarP(&opts.N, "n", "n", 1, "how many copies to start")
	f.StringVar(&opts.Task, "task", "", "task name (default: the sample's)")
	opts.flags.register(f)
	return cmd
}

// forkJSON is the JSON shape of `fork`.
type forkJSON struct {
	Source string     `json:"source"`
	Forks  []upResult `json:"forks"`
}

func runFork(cmd *cobra.Command, g *globals, path string, opts forkOptions) error {
	ctx := cmd.Context()
	if opts.Project == "" {
		return usageError{fmt.Errorf("fork: give the sample to copy with -p PROJECT")}
	}
	if opts.N < 1 {
		return usageError{fmt.Errorf("fork: -n %d: give at least 1", opts.N)}
	}
	o, err := g.orchestrator(false)
	if err != nil {
		return err
	}
	defer o.Close()
	task, err := taskOf(cmd, g, o, opts.Project, opts.Task, path, &opts.flags)
	if err != nil {
		return err
	}
	// The task's own state goes on return; the forks, handed over, stay.
	defer func() { _ = task.Cleanup(context.WithoutCancel(ctx)) }()
	forks, err := task.Fork(ctx, opts.Project, opts.N)
	if err != nil {
		return err
	}
	res := forkJSON{Source: opts.Project}
	for _, s := range forks {
		// Hand each fork over: it outlives this process. Interrupted before the hand-over is
		// complete, fork removes them all: a failed fork leaves nothing behind.
		if err := s.Detach(ctx); err != nil || ctx.Err() != nil {
			for _, f := range forks {
				_ = f.Cleanup(context.WithoutCancel(ctx))
			}
			if err == nil {
				err = ctx.Err()
			}
			return err
		}
		res.Forks = append(res.Forks, sampleResult(ctx, s))
	}
	g.setResult(res, func(w io.Writer) error {
		for _, f := range res.Forks {
			if _, err := fmt.Fprintln(w, f.Project); err != nil {
				return err
			}
		}
		return nil
	})
	return nil
}

// taskOf loads the task of the live sample project again: from PATH and the task flags when
// given, else from the compose files the sample's labels name, under its task name.
func taskOf(cmd *cobra.Command, g *globals, o *orchestrator.Orchestrator, project, name, path string, flags *taskFlags) (*orchestrator.Task, error) {
	ctx := cmd.Context()
	src, err := findProject(ctx, o, project)
	if err != nil {
		return nil, err
	}
	if path == "" && len(flags.Files) == 0 {
		files := strings.Split(src.Config, ",")
		if src.Config == "" || !strings.HasPrefix(files[0], "/") {
			return nil, cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("%s %s: its compose files cannot be found again from its labels (%q); give PATH and the flags it was started with", cmd.Name(), project, src.Config))
		}
		flags.Files = files
	}
	spec, _, err := flags.specs(name, path)
	if err != nil {
		return nil, err
	}
	if spec.Name == "" {
		spec.Name = src.Task
	}
	g.progress.building()
	return o.TaskInit(ctx, spec)
}

// findProject is the live project named name.
func findProject(ctx context.Context, o *orchestrator.Orchestrator, name string) (orchestrator.Project, error) {
	list, err := o.List(ctx, orchestrator.ListOptions{All: true})
	if err != nil {
		return orchestrator.Project{}, err
	}
	for _, p := range list.Projects {
		if p.Name == name {
			return p, nil
		}
	}
	return orchestrator.Project{}, cbxerr.New(cbxerr.ErrNotFound, fmt.Sprintf("no composebox sample named %s (see `composebox ls`)", name))
}

// sampleResult is a sample as up's JSON shows it.
func sampleResult(ctx context.Context, s *orchestrator.Sample) upResult {
	res := upResult{Project: s.Project(), Engine: s.Engine()}
	for _, sb := range s.Sandboxes() {
		svc := upServiceJSON{Name: sb.Service(), Container: sb.ContainerName(), Default: sb.IsDefault(), WorkingDir: sb.WorkingDir()}
		if conn, err := sb.Connection(ctx); err == nil {
			svc.Ports = conn.Ports
		}
		res.Services = append(res.Services, svc)
	}
	return res
}
