package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/lifecycle"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print composebox's version and the compose library it embeds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := map[string]string{"version": version, "go": runtime.Version(), "compose": lifecycle.ComposeVersion()}
			if g.JSON {
				return g.printJSON(v)
			}
			_, err := fmt.Fprintf(g.stdout, "composebox %s (%s, compose %s)\n", v["version"], v["go"], v["compose"])
			return err
		},
	}
}
