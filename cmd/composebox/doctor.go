package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images"
	"github.com/composebox/composebox/prereqs"
)

type doctorOptions struct {
	Build bool
	flags taskFlags
}

func newDoctorCmd(g *globals) *cobra.Command {
	var opts doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run composebox",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDoctor(cmd, g, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Build, "build", false, "build the base image first if it is missing")
	opts.flags.registerPolicy(cmd.Flags())
	return cmd
}

func runDoctor(cmd *cobra.Command, g *globals, opts doctorOptions) error {
	ctx := cmd.Context()
	if opts.Build {
		if c, _, err := engine.Connect(ctx, 0); err == nil {
			_, berr := images.NewBuilder(c).Base(ctx)
			c.Close()
			if berr != nil {
				return berr
			}
		}
	}
	p, err := opts.flags.policy()
	if err != nil {
		return err
	}
	policy := prereqs.Check{Name: "policy", Status: prereqs.Pass, Detail: p.Summary()}
	sn, err := g.subnets()
	if err != nil {
		return usageError{err}
	}
	r := prereqs.Doctor(ctx, prereqs.Options{Extra: []prereqs.Check{policy},
		Subnets: prereqs.SubnetOptions{Disabled: sn.Disabled, Pool: sn.Pool, Bits: sn.Bits}})
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
func doctorFailed(r prereqs.Report) error {
	var failed []string
	for _, c := range r.Checks {
		if c.Status == prereqs.Fail {
			failed = append(failed, c.Name)
		}
	}
	return errdefs.New(errdefs.ErrPrerequisite, "doctor: failed checks: "+strings.Join(failed, ", "))
}
