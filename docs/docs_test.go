// Package docs_test checks the manual's shape: the README stays a front page, and every
// relative link in the README and docs/ reaches a file (and a heading, where it names one).
package docs_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxReadmeLines keeps README.md a front page; the manual lives in docs/.
const maxReadmeLines = 250

func TestReadmeIsAFrontPage(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, over %d: move the detail into docs/ and link to it", n, maxReadmeLines)
	}
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

func TestRelativeLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := filepath.Glob("cli/*.md")
	pages = append(append(pages, cli...), "../README.md")
	for _, page := range pages {
		for _, link := range links(t, page) {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(link, "#")
			file := page
			if target != "" {
				file = filepath.Join(filepath.Dir(page), target)
			}
			st, err := os.Stat(file)
			if err != nil {
				t.Errorf("%s: link %q: %v", page, link, err)
				continue
			}
			if anchor != "" && !st.IsDir() && !hasAnchor(t, file, anchor) {
				t.Errorf("%s: link %q: %s has no heading #%s", page, link, file, anchor)
			}
		}
	}
}

// links are the Markdown link targets of a page, outside code blocks.
func links(t *testing.T, page string) []string {
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	fence := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// hasAnchor reports whether a heading of file has GitHub's anchor for it: lower case, spaces
// to hyphens, punctuation other than hyphens and underscores dropped.
func hasAnchor(t *testing.T, file, anchor string) bool {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		if slug(strings.TrimLeft(line, "# ")) == anchor {
			return true
		}
	}
	return false
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
