// Package mdsection keeps one section of a Markdown file per benchmark, between markers, so
// that each benchmark's run replaces its own section and leaves the others.
package mdsection

import (
	"os"
	"regexp"
	"strings"
)

// Write puts text into path between the markers of the section named name, replacing an
// earlier run's, or appends it.
func Write(path, name, text string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	sectionRE := regexp.MustCompile(`(?s)` + regexp.QuoteMeta(begin) + `.*` + regexp.QuoteMeta(end) + `\n?`)
	section := begin + "\n" + text + end + "\n"
	var out string
	if sectionRE.Match(old) {
		out = sectionRE.ReplaceAllLiteralString(string(old), section)
	} else {
		out = strings.TrimRight(string(old), "\n") + "\n\n" + section
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
