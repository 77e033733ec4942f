package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newGendocsCmd writes the CLI reference (docs/cli) from the commands themselves, so that the
// reference cannot say something the flags do not. `make docs` runs it; a test fails when the
// checked-in reference differs from what it would write.
func newGendocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "__gendocs DIR",
		Short:  "Write the CLI reference as Markdown into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return writeCLIReference(args[0])
		},
	}
}

// writeCLIReference writes one Markdown page per visible command into dir, replacing the pages
// a previous run wrote there (so a removed verb loses its page).
func writeCLIReference(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write CLI reference: %w", err)
	}
	old, err := filepath.Glob(filepath.Join(dir, "composebox*.md"))
	if err != nil {
		return fmt.Errorf("write CLI reference: %w", err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("write CLI reference: %w", err)
		}
	}
	// A fresh tree, never executed: cobra adds its help and completion commands only on
	// Execute, so they stay out, and the pages do not depend on how this process was started.
	root := newRootCmd(&globals{})
	// No "auto generated on <date>" footer: the pages must be byte-for-byte reproducible.
	root.DisableAutoGenTag = true
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("write CLI reference in %s: %w", dir, err)
	}
	return nil
}
