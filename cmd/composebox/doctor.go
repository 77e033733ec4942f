package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/internal/engine"
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
	if g.JSON {
		if err := g.printJSON(r); err != nil {
			return err
		}
	} else {
		for _, c := range r.Checks {
			fmt.Fprintln(g.stdout, c)
		}
	}
	if !r.OK {
		// The report already says what failed and how to fix it.
		return exitError{code: exitFailure, silent: true}
	}
	return nil
}
