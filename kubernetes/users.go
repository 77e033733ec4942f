package kubernetes

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
)

// Users. The exec subresource has no user of its own: an exec runs as the container's process
// user. So that an exec may run as any user, as Docker's may, a container whose image has
// nsenter(1) (busybox's or util-linux's) runs as root, and its main process, its probes and
// every exec switch to their user with `nsenter -S UID -G GID --`: with no namespace to enter,
// nsenter only sets the ids, and a non-root target loses every capability, as it does under
// Docker. A container whose image has no nsenter runs as its user (runAsUser), and an exec as
// anyone else fails as not supported.
//
// Names resolve against the image's /etc/passwd and /etc/group as Docker resolves them: the
// main process's from the image on the local engine when the pod is made, an exec's from the
// container's own files when it starts (so a user the sample adds is found).

// annotationExecAs records how a pod's execs get their user: "switch:PATH" (the container runs
// as root; PATH is nsenter) or "fixed" (the container runs as its user; no exec can switch).
// annotationHome is "env" when the image's or the service's environment sets HOME, which an
// exec then keeps, as Docker's does.
const (
	annotationExecAs = annotationPrefix + "exec-as"
	annotationHome   = annotationPrefix + "home"
	execAsFixed      = "fixed"
	execAsSwitch     = "switch:"
)

// nsenterPaths are where images keep nsenter.
var nsenterPaths = []string{"/usr/bin/nsenter", "/bin/nsenter", "/usr/sbin/nsenter", "/sbin/nsenter", "/usr/local/bin/nsenter"}

// imageFacts is what a pod spec needs from an image beyond what the registry's manifest says.
type imageFacts struct {
	entrypoint, cmd []string
	user, workdir   string
	// home: the image's environment sets HOME.
	home bool
	// passwd and group are the image's /etc/passwd and /etc/group ("" when absent).
	passwd, group string
	// nsenter is the path of the image's nsenter, "" when it has none.
	nsenter string
}

// factsCache holds imageFacts by image id: an image's files never change under its id.
var factsCache sync.Map

// imageFacts reads ref's facts from the local engine, through a container created (never
// started) from it and removed at once; nil, with no error, when the engine lacks the image
// (one the registry alone holds). The container carries the project's labels, so that a crash
// between its creation and its removal leaves nothing the Docker sweep would miss.
func (b *Backend) imageFacts(ctx context.Context, ref string, lbl map[string]string) (*imageFacts, error) {
	img, err := b.docker.ImageInspect(ctx, ref)
	if client.IsErrNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if f, ok := factsCache.Load(img.ID); ok {
		return f.(*imageFacts), nil
	}
	f := &imageFacts{}
	if c := img.Config; c != nil {
		f.entrypoint, f.cmd, f.user, f.workdir = c.Entrypoint, c.Cmd, c.User, c.WorkingDir
		f.home = slices.ContainsFunc(c.Env, func(e string) bool { return strings.HasPrefix(e, "HOME=") })
	}
	probeLabels := map[string]string{labels.LabelManaged: "true"}
	for _, k := range []string{labels.ComposeProjectLabel, labels.LabelTask, labels.LabelSample, labels.LabelOwner, labels.LabelCreated} {
		if v, ok := lbl[k]; ok {
			probeLabels[k] = v
		}
	}
	created, err := b.docker.ContainerCreate(ctx, &container.Config{Image: img.ID, Entrypoint: []string{"/composebox-never-started"}, Labels: probeLabels},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		return nil, fmt.Errorf("read the users of image %s: %w", ref, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := b.docker.ContainerRemove(rctx, created.ID, container.RemoveOptions{Force: true}); err != nil {
			b.log.Warn("remove image probe container", "image", ref, "err", err)
		}
	}()
	if f.passwd, err = b.copyOut(ctx, created.ID, "/etc/passwd"); err != nil {
		return nil, err
	}
	if f.group, err = b.copyOut(ctx, created.ID, "/etc/group"); err != nil {
		return nil, err
	}
	for _, p := range nsenterPaths {
		if _, err := b.docker.ContainerStatPath(ctx, created.ID, p); err == nil {
			f.nsenter = p
			break
		}
	}
	factsCache.Store(img.ID, f)
	return f, nil
}

// copyOut reads a small regular file out of a container ("" when it does not exist).
func (b *Backend) copyOut(ctx context.Context, id, path string) (string, error) {
	rc, _, err := b.docker.CopyFromContainer(ctx, id, path)
	if client.IsErrNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s of an image: %w", path, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("read %s of an image: %w", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(io.LimitReader(tr, 4<<20))
			return string(data), err
		}
	}
}

// account is a user as an image's files resolve it.
type account struct {
	uid, gid int64
	home     string
}

// lookupUser resolves spec (name or uid, then optionally :group by name or gid) against passwd
// and group as Docker does: a number matches by id and stands for itself when no entry has it
// (gid 0, home /); a name must be found. "" is root.
func lookupUser(spec, passwd, group string) (account, error) {
	u, g, hasGroup := strings.Cut(spec, ":")
	a := account{home: "/"}
	uid, uerr := strconv.ParseInt(u, 10, 64)
	if u == "" {
		uid, uerr = 0, nil
	}
	found := false
	for _, line := range strings.Split(passwd, "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 {
			continue
		}
		id, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || (uerr == nil && id != uid) || (uerr != nil && f[0] != u) {
			continue
		}
		gid, _ := strconv.ParseInt(f[3], 10, 64)
		a, found = account{uid: id, gid: gid, home: f[5]}, true
		break
	}
	if !found {
		if uerr != nil {
			return a, fmt.Errorf("unable to find user %s: no matching entries in passwd file", u)
		}
		a.uid = uid
	}
	if !hasGroup {
		return a, nil
	}
	gid, gerr := strconv.ParseInt(g, 10, 64)
	for _, line := range strings.Split(group, "\n") {
		f := strings.Split(line, ":")
		if len(f) < 3 {
			continue
		}
		id, err := strconv.ParseInt(f[2], 10, 64)
		if err == nil && (gerr == nil && id == gid || gerr != nil && f[0] == g) {
			a.gid = id
			return a, nil
		}
	}
	if gerr != nil {
		return a, fmt.Errorf("unable to find group %s: no matching entries in group file", g)
	}
	a.gid = gid
	return a, nil
}

// isRoot reports a user spec that names root whatever the image's files say.
func isRoot(spec string) bool {
	u, g, _ := strings.Cut(spec, ":")
	return (u == "" || u == "0" || u == "root") && (g == "" || g == "0" || g == "root")
}

// userScript is the start of every exec: it resolves its user against the container's
// /etc/passwd and /etc/group as Docker does (see lookupUser), changes directory, and puts
// `nsenter -S UID -G GID -- env HOME=...` (switching) or `env` (not) before the command.
// Arguments: user, nsenter ("" when the container cannot switch: no resolution), working
// directory, keep-home ("1": HOME is not set), then env's arguments. The script's caller
// appends how the command runs (exec "$@", or in the background).
const userScript = `u=$1 n=$2 d=$3 k=$4; shift 4
uid=0 gid=0 home=/
if [ -n "$n" ]; then
  g=; case $u in *:*) g=${u#*:}; u=${u%%:*} ;; esac
  [ -n "$u" ] || u=0
  case $u in *[!0-9]*) num= ;; *) num=1 ;; esac
  found=
  while IFS=: read -r pn _ pu pg _ ph _ || [ -n "$pn" ]; do
    if { [ -n "$num" ] && [ "$pu" = "$u" ]; } || { [ -z "$num" ] && [ "$pn" = "$u" ]; }; then
      uid=$pu gid=$pg home=$ph found=1; break
    fi
  done 2>/dev/null </etc/passwd
  if [ -z "$found" ]; then
    [ -n "$num" ] || { echo "unable to find user $u: no matching entries in passwd file" >&2; exit 126; }
    uid=$u
  fi
  if [ -n "$g" ]; then
    case $g in *[!0-9]*) num= ;; *) num=1 ;; esac
    found=
    while IFS=: read -r gn _ gi _ || [ -n "$gn" ]; do
      if { [ -n "$num" ] && [ "$gi" = "$g" ]; } || { [ -z "$num" ] && [ "$gn" = "$g" ]; }; then
        gid=$gi found=1; break
      fi
    done 2>/dev/null </etc/group
    if [ -z "$found" ]; then
      [ -n "$num" ] || { echo "unable to find group $g: no matching entries in group file" >&2; exit 126; }
      gid=$g
    fi
  fi
fi
if [ -n "$d" ]; then cd -- "$d" 2>/dev/null || exit 240; fi
[ -n "$k" ] || set -- HOME="$home" "$@"
if [ -n "$n" ] && [ "$uid:$gid" != 0:0 ]; then set -- "$n" -S "$uid" -G "$gid" -- env "$@"; else set -- env "$@"; fi
`

// execMode is how one pod's execs get their user (annotationExecAs, annotationHome).
type execMode struct {
	// nsenter is the image's nsenter when the container runs as root and switches; "" when
	// it runs as its user.
	nsenter string
	// keepHome: the environment's HOME stays.
	keepHome bool
}

func modeOf(ann map[string]string) execMode {
	m := execMode{keepHome: ann[annotationHome] == "env"}
	if p, ok := strings.CutPrefix(ann[annotationExecAs], execAsSwitch); ok {
		m.nsenter = p
	}
	return m
}

// modes caches each container's execMode, learnt from its pod when the backend saw it (a
// wait, an inspect), so that an exec never GETs its pod first.
var modes sync.Map

func (b *Backend) modeFor(ctx context.Context, id string) (execMode, error) {
	if m, ok := modes.Load(id); ok {
		return m.(execMode), nil
	}
	pod, err := b.pod(ctx, id)
	if err != nil {
		return execMode{}, err
	}
	m := modeOf(pod.Annotations)
	modes.Store(id, m)
	return m, nil
}

// userArgs are userScript's arguments for an exec as user (the target's user when "").
func userArgs(m execMode, targetUser, user, cwd string) ([]string, error) {
	if user == "" {
		user = targetUser
	}
	if m.nsenter == "" {
		if !sameUser(user, targetUser) {
			return nil, errdefs.Wrap(errdefs.ErrPrerequisite, ErrNotSupported,
				fmt.Sprintf("kubernetes: exec as user %s: the image has no nsenter, so its container runs as %s and cannot switch", user, orRoot(targetUser)))
		}
		return []string{"", "", cwd, "1"}, nil
	}
	keep := ""
	if m.keepHome {
		keep = "1"
	}
	return []string{user, m.nsenter, cwd, keep}, nil
}

func orRoot(u string) string {
	if u == "" {
		return "root"
	}
	return u
}
