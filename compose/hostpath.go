package compose

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Host paths. A compose file names host paths in many places (bind sources, build contexts and
// Dockerfiles, env and label files, extends and include files, secret and config files, seccomp
// profiles). Each must resolve, with every symlink followed and ".." cleaned, to a place inside
// the task root or one of the policy's AllowedMountRoots. The task root is the project directory;
// it can never be "/", a home directory or a system directory, because then it would confine
// nothing: such a root is refused and allows no host path at all.

// kernelTrees are system trees no task root may lie in (nor be).
var kernelTrees = []string{
	"/proc", "/sys", "/dev", "/boot", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/run", "/var/run", "/var/lib/docker", "/var/lib/containerd", "/run/containerd",
}

// protectedPaths are paths no task root may hold: a root that is one of them or an ancestor of
// one (/, /var, /home, a home directory) would let a file reach them.
var protectedPaths = []string{
	"/home", "/root", "/tmp", "/var/tmp", "/var/lib/docker", "/var/lib/containerd", "/var/run/docker.sock",
	"/run/docker.sock", "/etc", "/usr", "/var/log",
}

// RefusedRoot reports why dir cannot be a task root, or "" when it can: "/", a home directory
// (the user's, /root, or any directory directly under /home), a system directory, an ancestor of
// one, or anything under /proc, /sys, /dev, /etc, /usr, /run or the engine's data directory.
// Symlinks in dir are resolved first.
func RefusedRoot(dir string) string {
	if dir == "" {
		return "no task directory"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err.Error()
	}
	r := ResolvePath(abs)
	if r == "/" {
		return "it is the host's root directory"
	}
	if filepath.Dir(r) == "/home" {
		return "it is a home directory"
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		if rh := ResolvePath(filepath.Clean(home)); r == rh || Within(rh, r) {
			return "it is or holds the home directory " + rh
		}
	}
	for _, t := range kernelTrees {
		if Within(r, t) {
			return "it is a system directory (under " + t + ")"
		}
	}
	for _, p := range protectedPaths {
		if Within(p, r) {
			return "it holds " + p
		}
	}
	return ""
}

// confiner decides whether a host path may be used: inside the task root or an extra root, or
// anywhere with AllowAnyMount; never the docker socket.
type confiner struct {
	roots   []string // resolved, absolute
	refused string   // the task root, when it was refused
	why     string   // why it was refused
	any     bool
	socket  bool // AllowDockerSocket: the socket itself may be bound, from wherever it is
	sockets []string
}

func newConfiner(p Policy, workingDir string) *confiner {
	c := &confiner{any: p.AllowAnyMount, socket: p.AllowDockerSocket, sockets: p.sockets()}
	if workingDir != "" {
		if why := RefusedRoot(workingDir); why != "" {
			c.refused, c.why = workingDir, why
		} else if abs, err := filepath.Abs(workingDir); err == nil {
			c.roots = append(c.roots, ResolvePath(abs))
		}
	}
	for _, r := range p.AllowedMountRoots {
		if abs, err := filepath.Abs(r); err == nil {
			c.roots = append(c.roots, ResolvePath(abs))
		}
	}
	slices.Sort(c.roots)
	c.roots = slices.Compact(c.roots)
	return c
}

func (p Policy) sockets() []string {
	socks := p.DockerSockets
	if len(socks) == 0 {
		socks = defaultSockets
	}
	var out []string
	for _, s := range socks {
		s = filepath.Clean(s)
		out = append(out, s, ResolvePath(s))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// pathVerdict is the outcome of checking one host path.
type pathVerdict struct {
	resolved string // the path with every symlink resolved
	rule     string // "" when allowed
	why      string
	optIn    string
}

const rootOptIn = "--allow-mount-root DIR or --allow any-mount"

// check decides one host path. bind says it is mounted into a container (a bind source, a
// secret or config file), where /dev/null is allowed and the docker socket is refused.
func (c *confiner) check(path string, bind bool) pathVerdict {
	if !filepath.IsAbs(path) {
		// The loader makes every host path absolute against the project directory; anything
		// else would resolve against composebox's own working directory.
		return pathVerdict{resolved: path, rule: "host-path", why: "a host path that is not absolute"}
	}
	abs := filepath.Clean(path)
	resolved := ResolvePath(abs)
	v := pathVerdict{resolved: resolved}
	if bind && resolved == "/dev/null" {
		return v
	}
	if bind && c.socket && (slices.Contains(c.sockets, abs) || slices.Contains(c.sockets, resolved)) {
		return v // the socket itself, allowed by the docker-socket opt-in wherever it lives
	}
	if bind && !c.socket {
		for _, sock := range c.sockets {
			for _, src := range []string{abs, resolved} {
				if Within(sock, src) {
					what := "the docker socket"
					if src != sock {
						what = "a directory holding the docker socket " + sock
					}
					v.rule, v.why, v.optIn = "docker-socket", "mounts "+what, "--allow docker-socket"
					return v
				}
			}
		}
	}
	if c.any {
		return v
	}
	for _, root := range c.roots {
		if Within(resolved, root) {
			return v
		}
	}
	v.rule, v.optIn = "host-path", rootOptIn
	switch {
	case c.refused != "" && len(c.roots) == 0:
		v.why = fmt.Sprintf("outside the allowed roots: the task directory %s cannot be a root (%s); give the task a directory of its own", c.refused, c.why)
	case c.refused != "":
		v.why = fmt.Sprintf("outside the allowed roots %s (the task directory %s cannot be a root: %s)", strings.Join(c.roots, ", "), c.refused, c.why)
	case len(c.roots) == 0:
		v.why = "outside the allowed roots: there is none"
	default:
		v.why = "outside the allowed roots " + strings.Join(c.roots, ", ")
	}
	return v
}

// explain is why the path, shown as written, was refused: with where it resolves to, when that
// is not what is shown.
func (v pathVerdict) explain(shown string) string {
	if v.rule == "host-path" && v.resolved != shown && filepath.IsAbs(v.resolved) {
		return "resolves to " + v.resolved + ", " + v.why
	}
	return v.why
}

// Within reports whether path is root or below it. Both must be clean and absolute.
func Within(path, root string) bool {
	if root == "/" {
		return true
	}
	return path == root || strings.HasPrefix(path, root+"/")
}

// ResolvePath resolves every symlink in an absolute path, like filepath.EvalSymlinks, but
// also for a path that does not exist (yet): the existing part is resolved and the rest kept
// as written, and a dangling symlink is followed to where it points. Docker creates missing
// bind sources, so what matters is where they would land.
func ResolvePath(p string) string {
	const maxLinks = 255
	links := 0
	resolved := "/"
	rest := strings.Split(filepath.Clean(p), "/")
	for len(rest) > 0 {
		part := rest[0]
		rest = rest[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return filepath.Join(append([]string{next}, rest...)...)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			resolved = next
			continue
		}
		target, err := os.Readlink(next)
		if links++; err != nil || links > maxLinks {
			return filepath.Join(append([]string{next}, rest...)...)
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved
}
