package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/composebox/composebox/internal/errdefs"
)

// Files a task hands composebox. Everything composebox reads from a task directory (a
// Dockerfile, a .dockerignore, the build context) comes from a third party, so it is read the
// way a hostile file is: refused by type before it is opened (a FIFO would block the open
// forever, /dev/urandom would never end, a device open can act on hardware), refused when a
// symlink takes it outside the task's roots, and read with a size cap.

// Size caps of what a build reads from the task. Real Dockerfiles and ignore files are a few
// kB; a build context is bounded by MaxBuildContext.
const (
	MaxDockerfileSize   = 1 << 20
	MaxDockerignoreSize = 1 << 20
	// MaxBuildContext bounds the bytes of regular files a build context sends.
	MaxBuildContext = 8 << 30
)

// TaskRoots are the directories whose files a task may hand composebox under p: its working
// directory and the extra mount roots, symlinks resolved; "/" under AllowAnyMount.
func (p Policy) TaskRoots(workingDir string) []string {
	c := newConfiner(p, workingDir)
	if c.any {
		return []string{"/"}
	}
	return slices.Clone(c.roots)
}

// ReadTaskFile reads a file of the task: after resolving its symlinks it must lie inside one of
// roots (none: anywhere), be a regular file and hold at most max bytes. The type is checked
// before the open and again on the opened file, which is opened without blocking and without
// following a symlink swapped in meanwhile. A file that is not there matches ErrNotExist;
// every other refusal is ErrInvalidConfig (ErrPolicyViolation outside the roots), naming path.
func ReadTaskFile(path string, roots []string, max int64) ([]byte, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "read "+path)
	}
	if err := withinRoots(path, resolved, roots); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "read "+path)
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	f, err := os.OpenFile(resolved, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "read "+path)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "read "+path)
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode()) // swapped since the Lstat
	}
	if fi.Size() > max {
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("read %s: larger than the %s limit", path, byteSize(max)))
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "read "+path)
	}
	if int64(len(data)) > max {
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("read %s: larger than the %s limit", path, byteSize(max)))
	}
	return data, nil
}

func withinRoots(path, resolved string, roots []string) error {
	if len(roots) == 0 {
		return nil
	}
	for _, r := range roots {
		if Within(resolved, r) {
			return nil
		}
	}
	return errdefs.New(ErrPolicyViolation, fmt.Sprintf("read %s: it resolves to %s, outside the task's directories %v (rule host-path; allow with %s)", path, resolved, roots, rootOptIn))
}

func notRegular(path string, mode fs.FileMode) error {
	return errdefs.New(ErrInvalidConfig, fmt.Sprintf("read %s: %s, not a regular file", path, DescribeMode(mode)))
}

// DescribeMode names a file type for messages ("a socket").
func DescribeMode(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "a special file"
}

// BuildInput is what a local build takes from its task, read once: the Dockerfile's bytes
// (those that are checked are those that are sent) and the ignore patterns.
type BuildInput struct {
	// Context is the build context directory (empty for an inline Dockerfile, which is built
	// without one).
	Context string
	// Dockerfile is the Dockerfile's content.
	Dockerfile []byte
	// DockerfileName is the Dockerfile's path relative to Context, slash-separated; empty when
	// it lies outside the context or is inline.
	DockerfileName string
	// Excludes are the ignore file's patterns.
	Excludes []string
}

// ReadBuildInput reads a local build's inputs as ReadTaskFile does, each inside roots (none:
// the build context and the Dockerfile's directory, see BuildRoots), and walks the context as the builder will receive it: a FIFO, device or
// socket that the ignore file does not exclude is refused, and so is a context larger than
// MaxBuildContext. A cancelled ctx stops the walk.
func ReadBuildInput(ctx context.Context, b *types.BuildConfig, roots []string) (*BuildInput, error) {
	if b.DockerfileInline != "" {
		return &BuildInput{Dockerfile: []byte(b.DockerfileInline)}, nil
	}
	if isRemoteContext(b.Context) {
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("build context %s: a remote context is not supported", b.Context))
	}
	dir, err := filepath.EvalSymlinks(b.Context)
	if err != nil {
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "build context "+b.Context)
	}
	if len(roots) == 0 {
		roots = BuildRoots(b)
	}
	if err := withinRoots(b.Context, dir, roots); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("build context %s: not a directory", b.Context))
	}
	in := &BuildInput{Context: dir}
	df := DockerfilePath(b)
	if in.Dockerfile, err = ReadTaskFile(df, roots, MaxDockerfileSize); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("build context %s: Dockerfile %s does not exist", b.Context, df))
		}
		return nil, err
	}
	if rel, err := filepath.Rel(b.Context, df); err == nil && filepath.IsLocal(rel) {
		in.DockerfileName = filepath.ToSlash(rel)
	}
	pm, patterns, err := readIgnore(b.Context, df, roots)
	if err != nil {
		return nil, err
	}
	in.Excludes = patterns
	if err := walkContext(ctx, b.Context, pm, nil); err != nil {
		return nil, err
	}
	return in, nil
}

// BuildRoots are the directories a build's files may come from when the caller names no task
// roots: its context and the directory its Dockerfile is written in, symlinks resolved.
func BuildRoots(b *types.BuildConfig) []string {
	var roots []string
	for _, d := range []string{b.Context, filepath.Dir(DockerfilePath(b))} {
		if abs, err := filepath.Abs(d); err == nil {
			roots = append(roots, ResolvePath(abs))
		}
	}
	slices.Sort(roots)
	return slices.Compact(roots)
}

// readIgnore reads <Dockerfile>.dockerignore next to the Dockerfile if there is one, as
// BuildKit does, else .dockerignore at the context root. A nil matcher ignores nothing.
func readIgnore(dir, dockerfile string, roots []string) (*patternmatcher.PatternMatcher, []string, error) {
	candidates := []string{filepath.Join(dir, ".dockerignore")}
	if dockerfile != "" {
		candidates = append([]string{dockerfile + ".dockerignore"}, candidates...)
	}
	for _, c := range candidates {
		if _, err := os.Lstat(c); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		data, err := ReadTaskFile(c, roots, MaxDockerignoreSize)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, errdefs.Wrap(ErrInvalidConfig, err, "read "+c+": a symlink to nothing")
		}
		if err != nil {
			return nil, nil, err
		}
		patterns, err := ignorefile.ReadAll(bytes.NewReader(data))
		if err != nil {
			return nil, nil, errdefs.Wrap(ErrInvalidConfig, err, "read "+c)
		}
		if len(patterns) == 0 {
			return nil, nil, nil
		}
		pm, err := patternmatcher.New(patterns)
		if err != nil {
			return nil, nil, errdefs.Wrap(ErrInvalidConfig, err, "read "+c)
		}
		return pm, patterns, nil
	}
	return nil, nil, nil
}

// walkContext visits every entry of the build context dir that the builder would receive, in
// lexical order, refusing special files and a context past MaxBuildContext. Symlinks are
// entries of their own: the builder receives them as links and resolves them inside the
// context, never on the host. visit, when set, sees each entry kept.
func walkContext(ctx context.Context, dir string, pm *patternmatcher.PatternMatcher, visit func(rel, path string, fi fs.FileInfo) error) error {
	infos := map[string]patternmatcher.MatchInfo{}
	var total int64
	n := 0
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return errdefs.Wrap(ErrInvalidConfig, err, "build context "+dir)
		}
		if n++; n%256 == 0 && ctx.Err() != nil {
			return fmt.Errorf("build context %s: %w", dir, ctx.Err())
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if pm != nil {
			parent := infos[filepath.ToSlash(filepath.Dir(rel))]
			excluded, info, err := pm.MatchesUsingParentResults(rel, parent)
			if err != nil {
				return errdefs.Wrap(ErrInvalidConfig, err, "match .dockerignore")
			}
			if d.IsDir() {
				infos[rel] = info
			}
			if excluded {
				if d.IsDir() && !pm.Exclusions() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return errdefs.Wrap(ErrInvalidConfig, err, "build context "+dir)
		}
		mode := fi.Mode()
		switch {
		case mode.IsRegular():
			if total += fi.Size(); total > MaxBuildContext {
				return errdefs.New(ErrInvalidConfig, fmt.Sprintf("build context %s: larger than the %s limit", dir, byteSize(MaxBuildContext)))
			}
		case mode.IsDir(), mode&fs.ModeSymlink != 0:
		default:
			return errdefs.New(ErrInvalidConfig, fmt.Sprintf("build context %s: %s is %s: a build context holds regular files, directories and symlinks only (exclude it in .dockerignore)",
				dir, rel, DescribeMode(mode)))
		}
		if visit != nil {
			return visit(rel, path, fi)
		}
		return nil
	})
}
