package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

type egressOptions struct {
	Project string
	Set     []string
	Close   bool
}

func newEgressCmd(g *globals) *cobra.Command {
	var opts egressOptions
	cmd := &cobra.Command{
		Use:   "egress -p PROJECT [--set NAME[:PORT]]... [--close]",
		Short: "Show or change a sample's egress allowlist, and what it refused",
		Long: `Prints the egress allowlist of a sample started with --egress (or x-egress) and every lookup
and connection its gateway refused (egress_denied: service, name or address, port, protocol).
--set replaces the list of every service of the live sample (repeatable); --close leaves it
none. COMPOSEBOX_PROJECT stands in for -p.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := projectOf("egress", opts.Project)
			if err != nil {
				return err
			}
			opts.Project = p
			o, err := g.bareOrchestrator()
			if err != nil {
				return err
			}
			defer o.Close()
			ctx := cmd.Context()
			if len(opts.Set) > 0 || opts.Close {
				if len(opts.Set) > 0 && opts.Close {
					return usageError{fmt.Errorf("egress: --set and --close together")}
				}
				if err := o.SetEgress(ctx, opts.Project, opts.Set); err != nil {
					return err
				}
			}
			st, err := o.Egress(ctx, opts.Project)
			if err != nil {
				return err
			}
			g.setResult(st, func(w io.Writer) error {
				if st.Allow != nil {
					fmt.Fprintf(w, "allow: %s\n", orNone(st.Allow))
				}
				for _, svc := range slices.Sorted(mapsKeys(st.Services)) {
					fmt.Fprintf(w, "allow %s: %s\n", svc, orNone(st.Services[svc]))
				}
				if st.Ceiling != nil {
					fmt.Fprintf(w, "ceiling (--egress): %s\n", orNone(st.Ceiling))
				}
				for _, d := range st.Denials {
					what := d.Name
					if what == "" {
						what = d.Address
					}
					fmt.Fprintf(w, "denied %s %s %s port %d %s: %s\n", d.Time.Format("15:04:05"), d.Service, d.Protocol, d.Port, what, d.Reason)
				}
				return nil
			})
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Project, "project", "p", "", "the sample's project name")
	f.StringArrayVar(&opts.Set, "set", nil, "replace the allowlist of every service with NAME[:PORT] (repeatable)")
	f.BoolVar(&opts.Close, "close", false, "leave every service no egress at all")
	return cmd
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(nothing)"
	}
	return strings.Join(s, " ")
}

func mapsKeys(m map[string][]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
