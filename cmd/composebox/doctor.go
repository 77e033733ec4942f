package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

type doctorOptions struct {
	Build bool
	flags taskFlags
}

func newDoctorCmd(g *globals) *cobra.Command {
	var opts doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor [PATH]",
		Short: "Check that this machine can run composebox",
		Long: `Checks that this machine can run composebox: the daemon, its API version, the storage driver,
the base image, free networks per address pool, disk, and the policy in force. One line per
check, [pass], [warn] or [fail]; the exit status is 0 only when nothing failed.

With PATH (or -f), the task is also checked, resolved and loaded as 'composebox config' does
with the same task flags, without building or starting anything: "task" says whether it loads
and passes the policy (fail with every problem otherwise), and "pool" whether a warm pool can
keep samples of it (warn with the reason when not: its files reference per-sample variables).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			g.warnDeprecated(cmd, opts.flags.deprecations(false)...)
			return runDoctor(cmd, g, path, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Build, "build", false, "build the base image first if it is missing")
	opts.flags.register(cmd.Flags())
	return cmd
}

func runDoctor(cmd *cobra.Command, g *globals, path string, opts doctorOptions) error {
	ctx := cmd.Context()
	var tasks []backend.Check
	if path != "" || len(opts.flags.Files) > 0 {
		// A command line that cannot be understood is a usage error, not a failed check.
		if _, err := opts.flags.loadOptions(); err != nil {
			return err
		}
		tasks = taskChecks(ctx, g, path, &opts.flags)
	}
	p, err := opts.flags.policy()
	if err != nil {
		return err
	}
	policy := backend.Check{Name: "policy", Status: backend.Pass, Detail: p.Summary()}
	o, err := g.orchestrator(false)
	if err != nil {
		return err
	}
	defer o.Close()
	// The task's checks need no daemon, so they are reported even when it does not answer.
	r, err := o.Doctor(ctx, orchestrator.DoctorOptions{Build: opts.Build, Extra: []backend.Check{policy}, Local: tasks,
		HostAccess: p.AllowHostAccess})
	if err != nil {
		return err
	}
	g.setResult(r, func(w io.Writer) error {
		for _, c := range r.Checks {
			if _, err := fmt.Fprintln(w, c); err != nil {
				return err
			}
		}
		return nil
	})
	if !r.OK {
		// The report already says what failed and how to fix it: nothing more on stderr, but
		// the JSON document carries the error member.
		return exitError{code: exitFailure, silent: true, err: doctorFailed(r)}
	}
	return nil
}

// doctorFailed names the checks that failed.
func doctorFailed(r backend.Report) error {
	var failed []string
	for _, c := range r.Checks {
		if c.Status == backend.Fail {
			failed = append(failed, c.Name)
		}
	}
	return errdefs.New(errdefs.ErrPrerequisite, "doctor: failed checks: "+strings.Join(failed, ", "))
}

// taskChecks load the task as config does: "task" says whether it loads and passes the policy,
// "pool" whether a warm pool can keep its samples. A task that does not load has no pool check:
// what its files reference is not known.
func taskChecks(ctx context.Context, g *globals, arg string, flags *taskFlags) []backend.Check {
	name, _ := flags.path(arg)
	proj, _, err := loadTask(ctx, g, arg, "", flags)
	if err != nil {
		return []backend.Check{{Name: "task", Status: backend.Fail, Detail: errorKind(err) + ": " + strings.TrimSpace(err.Error())}}
	}
	checks := []backend.Check{{Name: "task", Status: backend.Pass,
		Detail: fmt.Sprintf("%s loads and passes the policy (services: %s)", name, strings.Join(proj.ServiceNames(), ", "))}}
	if ok, why := compose.Poolable(proj); ok {
		checks = append(checks, backend.Check{Name: "pool", Status: backend.Pass, Detail: "warm pools: yes"})
	} else {
		checks = append(checks, backend.Check{Name: "pool", Status: backend.Warn, Detail: "warm pools: no, the task cannot be pooled: " + why})
	}
	return checks
}
