package compose

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits bound what Load accepts before compose-go sees it, so that loading stays well under
// a couple of seconds whatever the input. Measured with compose-go v2.9.1 on this project's
// machine:
//   - nested anchors: compose-go walks every alias expansion (its !reset/!override
//     pre-processor, with a per-alias check that is quadratic), so 5 levels of 9 aliases in a
//     few hundred bytes took 4.8 s and 6 levels 47 s; yaml.v3's "excessive aliasing" check
//     runs only afterwards, when decoding;
//   - plain size: loading is superlinear in the number of nodes (yaml.v3 mapping decoding,
//     mapstructure): 250 kB of services took 1.2 s, 500 kB 3.8 s, 1 MB of labels 12 s.
//
// Real compose files are a few kB with a handful of anchors.
type Limits struct {
	// MaxFileSize is the largest compose file (or inline YAML), in bytes. Default 256 KiB.
	MaxFileSize int64
	// MaxNodes bounds the YAML nodes of one file with every alias expanded. Default 50 000.
	MaxNodes int64
	// MaxAliases bounds the alias expansions of one file, counting an alias inside an anchor once
	// for each time that anchor is expanded. Default 1 000.
	MaxAliases int64
	// MaxFiles bounds the files one project reads through -f, extends and include. Default 64.
	MaxFiles int
}

var defaultLimits = Limits{MaxFileSize: 256 << 10, MaxNodes: 50_000, MaxAliases: 1_000, MaxFiles: 64}

func (l Limits) withDefaults() Limits {
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = defaultLimits.MaxFileSize
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = defaultLimits.MaxNodes
	}
	if l.MaxAliases <= 0 {
		l.MaxAliases = defaultLimits.MaxAliases
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = defaultLimits.MaxFiles
	}
	return l
}

// readLimited reads a config file, refusing one larger than max without reading it all, and
// anything but a regular file (opening a FIFO would block, /dev/zero would never end).
func readLimited(path string, max int64) ([]byte, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, err
	case fi.IsDir():
		return nil, errors.New("is a directory, want a compose file")
	case !fi.Mode().IsRegular():
		return nil, errors.New("not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("file is larger than the %s limit", byteSize(max))
	}
	return data, nil
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// parseYAML parses every document of data into nodes, without expanding aliases, and checks
// the limits on the expanded size. Errors read "line N: problem" where yaml.v3 knows the line.
func parseYAML(data []byte, lim Limits) ([]*yaml.Node, error) {
	if int64(len(data)) > lim.MaxFileSize {
		return nil, fmt.Errorf("file is larger than the %s limit", byteSize(lim.MaxFileSize))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	c := &nodeCounter{memo: map[*yaml.Node]nodeCount{}, active: map[*yaml.Node]bool{}}
	var total nodeCount
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errors.New(syntaxError(data, err))
		}
		cnt, err := c.count(&n)
		if err != nil {
			return nil, err
		}
		total = total.add(cnt)
		if total.nodes > lim.MaxNodes {
			return nil, fmt.Errorf("more than %d YAML nodes once anchors are expanded", lim.MaxNodes)
		}
		if total.aliases > lim.MaxAliases {
			return nil, fmt.Errorf("more than %d alias expansions (nested anchors?)", lim.MaxAliases)
		}
		docs = append(docs, &n)
	}
	return docs, nil
}

var (
	reYAMLError   = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	reYAMLUnknown = regexp.MustCompile(`^yaml: unknown anchor '([^']*)' referenced$`)
)

// syntaxError words a yaml.v3 parse error as "line N: problem" with the line of the problem.
// yaml.v3 reports a parser error ("did not find expected ...") at the 0-based line where the
// enclosing node starts, which reads as the line before it and can be far from the problem;
// scanner errors carry the right line. The first line whose prefix of the file fails the same
// way is where the problem shows, so look for it, within a budget of bytes re-parsed.
func syntaxError(data []byte, err error) string {
	msg := err.Error()
	if m := reYAMLUnknown.FindStringSubmatch(msg); m != nil {
		if i := bytes.Index(data, []byte("*"+m[1])); i >= 0 {
			return fmt.Sprintf("line %d: unknown anchor %q referenced", bytes.Count(data[:i], []byte("\n"))+1, m[1])
		}
	}
	m := reYAMLError.FindStringSubmatch(msg)
	if m == nil {
		return strings.TrimPrefix(msg, "yaml: ")
	}
	reported, _ := strconv.Atoi(m[1])
	problem := m[2]
	start := 0 // the 1-based line where the enclosing node starts, for parser errors
	if strings.HasPrefix(problem, "did not find expected") {
		start = reported + 1
	}
	budget := 16 * len(data)
	for k, end := 0, 0; end < len(data) && budget > 0; k++ {
		next := bytes.IndexByte(data[end:], '\n')
		if next < 0 {
			end = len(data)
		} else {
			end += next + 1
		}
		if k+1 < reported {
			continue
		}
		budget -= end
		if e := parseAll(data[:end]); e != nil && e.Error() == msg {
			if start > 0 && start < k+1 {
				return fmt.Sprintf("line %d: %s (in the node starting on line %d)", k+1, problem, start)
			}
			return fmt.Sprintf("line %d: %s", k+1, problem)
		}
	}
	if start > 0 {
		return fmt.Sprintf("line %d: %s", start, problem)
	}
	return strings.TrimPrefix(msg, "yaml: ")
}

func parseAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

type nodeCount struct{ nodes, aliases int64 }

// saturate keeps counts of pathological documents (9^30 expansions) from overflowing.
const saturate = 1 << 50

func (a nodeCount) add(b nodeCount) nodeCount {
	return nodeCount{min(a.nodes+b.nodes, saturate), min(a.aliases+b.aliases, saturate)}
}

type nodeCounter struct {
	memo   map[*yaml.Node]nodeCount
	active map[*yaml.Node]bool
}

// count returns the size of n with every alias expanded, in time linear in the unexpanded
// document thanks to the memo.
func (c *nodeCounter) count(n *yaml.Node) (nodeCount, error) {
	if n == nil {
		return nodeCount{}, nil
	}
	if got, ok := c.memo[n]; ok {
		return got, nil
	}
	if c.active[n] {
		return nodeCount{}, fmt.Errorf("line %d: anchor %q contains an alias to itself", n.Line, n.Anchor)
	}
	c.active[n] = true
	defer delete(c.active, n)
	total := nodeCount{nodes: 1}
	if n.Kind == yaml.AliasNode {
		inner, err := c.count(n.Alias)
		if err != nil {
			return nodeCount{}, err
		}
		total = total.add(inner).add(nodeCount{aliases: 1})
	}
	for _, child := range n.Content {
		cc, err := c.count(child)
		if err != nil {
			return nodeCount{}, err
		}
		total = total.add(cc)
	}
	c.memo[n] = total
	return total, nil
}

// fileRef is a host path a compose file makes the loader read before composebox sees the loaded
// project: an extends file, an env or label file, an include's files, directory and env files.
type fileRef struct {
	path  string // as written, before interpolation
	field string // where: services.web.extends.file, include[0].path, ...
	yaml  bool   // a compose file (extends, include), read and followed in turn
}

// includeRef is one entry of the top-level include list.
type includeRef struct {
	index      int
	paths      []string
	projectDir string
	envFiles   []string
}

// referencedFiles lists the files a document makes the loader read, as written (before
// interpolation): services.*.extends.file, services.*.env_file, services.*.label_file, and the
// top-level include entries. Merge keys (<<: *anchor) are followed as the loader follows them.
func referencedFiles(docs []*yaml.Node) ([]fileRef, []includeRef) {
	var refs []fileRef
	var incs []includeRef
	strs := func(n *yaml.Node) []string {
		n = deref(n)
		if n == nil {
			return nil
		}
		if n.Kind == yaml.ScalarNode {
			return []string{n.Value}
		}
		var out []string
		if n.Kind == yaml.SequenceNode {
			for _, e := range n.Content {
				if v := scalarOf(e); v != "" {
					out = append(out, v)
				} else if v := scalarOf(lookupKey(e, "path")); v != "" {
					out = append(out, v)
				}
			}
		}
		return out
	}
	for _, d := range docs {
		root := mappingOf(d)
		if root == nil {
			continue
		}
		for _, e := range mappingEntries(lookupKey(root, "services")) {
			svc := e.value
			base := "services." + e.key + "."
			for _, f := range strs(lookupKey(lookupKey(svc, "extends"), "file")) {
				refs = append(refs, fileRef{path: f, field: base + "extends.file", yaml: true})
			}
			for _, f := range strs(lookupKey(svc, "env_file")) {
				refs = append(refs, fileRef{path: f, field: base + "env_file"})
			}
			for _, f := range strs(lookupKey(svc, "label_file")) {
				refs = append(refs, fileRef{path: f, field: base + "label_file"})
			}
		}
		inc := deref(lookupKey(root, "include"))
		if inc == nil || inc.Kind != yaml.SequenceNode {
			continue
		}
		for i, item := range inc.Content {
			r := includeRef{index: i}
			if v := scalarOf(item); v != "" {
				r.paths = []string{v}
			} else {
				r.paths = strs(lookupKey(item, "path"))
				r.projectDir = scalarOf(lookupKey(item, "project_directory"))
				r.envFiles = strs(lookupKey(item, "env_file"))
			}
			incs = append(incs, r)
		}
	}
	return refs, incs
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return deref(n.Content[0])
	}
	return n
}

func mappingOf(n *yaml.Node) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	return n
}

func scalarOf(n *yaml.Node) string {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

type entry struct {
	key   string
	value *yaml.Node
}

// mappingEntries lists a mapping's entries as the YAML decoder sees them: its own keys, then
// those merged in through <<: (a mapping or a list of them), a key of its own winning.
func mappingEntries(n *yaml.Node) []entry {
	return mergedEntries(n, 0)
}

func mergedEntries(n *yaml.Node, depth int) []entry {
	m := mappingOf(n)
	if m == nil || depth > 32 {
		return nil
	}
	var own, merged []entry
	for i := 0; i+1 < len(m.Content); i += 2 {
		// A key may itself be an alias (*k: ...), which the decoder reads as the anchored key.
		k, v := deref(m.Content[i]), m.Content[i+1]
		if k == nil {
			continue
		}
		if k.ShortTag() == "!!merge" {
			src := deref(v)
			if src != nil && src.Kind == yaml.SequenceNode {
				for _, e := range src.Content {
					merged = append(merged, mergedEntries(e, depth+1)...)
				}
			} else {
				merged = append(merged, mergedEntries(src, depth+1)...)
			}
			continue
		}
		own = append(own, entry{k.Value, v})
	}
	out := own
	for _, e := range merged {
		if !slices.ContainsFunc(out, func(o entry) bool { return o.key == e.key }) {
			out = append(out, e)
		}
	}
	return out
}

// lookupKey returns the value of key in mapping m (merge keys followed), or nil.
func lookupKey(m *yaml.Node, key string) *yaml.Node {
	for _, e := range mappingEntries(m) {
		if e.key == key {
			return e.value
		}
	}
	return nil
}

// lineOf returns the line of the node at a dotted path (services.web.ports.0), or of the
// deepest part of it that exists; 0 when not even the first part exists.
func lineOf(docs []*yaml.Node, path []string) int {
	line := 0
	for _, d := range docs {
		cur := deref(d)
		l := 0
		for _, part := range path {
			cur = deref(cur)
			if cur == nil {
				break
			}
			var next, at *yaml.Node
			switch cur.Kind {
			case yaml.MappingNode:
				for i := 0; i+1 < len(cur.Content); i += 2 {
					if cur.Content[i].Value == part {
						at, next = cur.Content[i], cur.Content[i+1]
					}
				}
			case yaml.SequenceNode:
				if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(cur.Content) {
					at, next = cur.Content[i], cur.Content[i]
				}
			}
			if at == nil {
				break
			}
			l, cur = at.Line, next
		}
		if l > line {
			line = l
		}
	}
	return line
}

var (
	reYAMLLine    = regexp.MustCompile(`^line \d+: `)
	reServicePath = regexp.MustCompile(`\b((?:services|networks|volumes|secrets|configs)\.[A-Za-z0-9_.\-]+)`)
	reServiceName = regexp.MustCompile(`\bservices?[ .]"?([A-Za-z0-9][A-Za-z0-9_.\-]*)"?`)
	reProperty    = regexp.MustCompile(`additional propert(?:y|ies) '`)
	reQuoted      = regexp.MustCompile(`'([^']+)'`)
)

// locate finds the line an error message from compose-go is about, from the dotted path or the
// service it names; for unknown properties, the first of them in the file.
func locate(docs []*yaml.Node, msg string) int {
	if reYAMLLine.MatchString(msg) {
		return 0 // already there
	}
	var path []string
	if m := reServicePath.FindStringSubmatch(msg); m != nil {
		path = strings.Split(strings.TrimSuffix(m[1], "."), ".")
	} else if m := reServiceName.FindStringSubmatch(msg); m != nil {
		path = []string{"services", m[1]}
	}
	if i := reProperty.FindStringIndex(msg); i != nil {
		line := 0
		for _, m := range reQuoted.FindAllStringSubmatch(msg[i[0]:], -1) {
			if l := lineOf(docs, append(slices.Clone(path), m[1])); l > 0 && (line == 0 || l < line) {
				line = l
			}
		}
		if line > 0 {
			return line
		}
	}
	if len(path) == 0 {
		return 0
	}
	return lineOf(docs, path)
}
