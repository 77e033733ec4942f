package kubernetes

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/errdefs"
)

// A bind cannot reach the host from a pod: the cluster's nodes are not the machine the task
// directory is on. So a bind is a copy, made before the service's container starts. The pod
// gets an emptyDir and an init container (composebox's base image) that waits; Up streams a
// tar archive of every bind's source into it over the exec subresource, the init container
// unpacks it and ends, and only then does the service's container start, each bind mounted
// from the emptyDir at its target, read-only where the bind is `:ro`. Ownership, modes and
// symbolic links come as they are on the host.
//
// What is copied is the task directory's files: a bind's source must be inside the task
// directory, or be an empty (or missing) directory, which is what composebox's per-sample
// directories are when a sample starts. Other host paths (a socket, a device, a directory
// elsewhere, which the policy refuses unless opted in) do not map and fail with a typed error.
// A service's binds together may bring at most BindLimit bytes. Writes into a bind stay in the
// pod: they never reach the host, nor another service binding the same path.

// BindLimit is the most a service's binds may copy into its pod, every file together.
const BindLimit = 256 << 20

const (
	bindsName = "composebox-binds"
	bindsDir  = "/composebox-binds"
	// The init container waits on a FIFO that the unpacking exec writes to once the archive
	// is in place. Either side makes the FIFO, whichever comes first; neither polls. It lives
	// at the emptyDir's top, which no service mounts (each bind is a directory below it).
	bindsFIFO   = bindsDir + "/.ready"
	bindsWait   = `mkfifo ` + bindsFIFO + ` 2>/dev/null; read -r _ <` + bindsFIFO
	bindsUnpack = `tar -xf - -C ` + bindsDir + ` && { mkfifo ` + bindsFIFO + ` 2>/dev/null; echo done >` + bindsFIFO + `; }`
)

// bind is one bind of a service, as it is copied.
type bind struct {
	source, target string
	readOnly       bool
	// file: the source is a single file, which arrives as entry/file.
	file bool
	// missing: the source does not exist (Docker would make it an empty directory).
	missing bool
	// entry is the bind's directory in the emptyDir and in the archive.
	entry string
}

// bindsOf lists a service's binds and checks that each maps: under the task directory, or an
// empty or missing directory; at most BindLimit bytes in all.
func bindsOf(p *types.Project, svc types.ServiceConfig) ([]bind, error) {
	taskDir := p.WorkingDir
	if d, err := filepath.EvalSymlinks(taskDir); err == nil {
		taskDir = d
	}
	var out []bind
	var total int64
	for i, v := range svc.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		b := bind{source: v.Source, target: path.Clean(v.Target), readOnly: v.ReadOnly, entry: fmt.Sprintf("b%d", i)}
		fail := func(why string) error {
			return notSupported(fmt.Sprintf("service %s: bind %s:%s: %s", svc.Name, v.Source, v.Target, why))
		}
		fi, err := os.Stat(v.Source)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			b.missing = true
			out = append(out, b)
			continue
		case err != nil:
			return nil, errdefs.Wrap(errdefs.ErrInvalidConfig, err, "kubernetes: service "+svc.Name+": bind "+v.Source)
		case !fi.IsDir() && !fi.Mode().IsRegular():
			return nil, fail(fmt.Sprintf("%s does not map onto a pod: only files and directories are copied", compose.DescribeMode(fi.Mode())))
		}
		b.file = !fi.IsDir()
		src := v.Source
		if r, err := filepath.EvalSymlinks(src); err == nil {
			src = r
		}
		if !compose.Within(src, taskDir) {
			if fi.IsDir() {
				if entries, err := os.ReadDir(src); err == nil && len(entries) == 0 {
					out = append(out, b) // an empty directory arrives as one
					continue
				}
			}
			return nil, fail("host paths outside the task directory (" + p.WorkingDir + ") do not map onto a pod: only the task directory's files are copied")
		}
		n, err := treeSize(src)
		if err != nil {
			return nil, fail(err.Error())
		}
		if total += n; total > BindLimit {
			return nil, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf(
				"kubernetes: service %s: binds copy %d bytes into the pod, more than %d MiB", svc.Name, total, BindLimit>>20))
		}
		out = append(out, b)
	}
	return out, nil
}

// treeSize is the bytes of a file or a tree's regular files; anything but files, directories
// and symbolic links fails.
func treeSize(root string) (int64, error) {
	var n int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch t := d.Type(); {
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		case t.IsDir(), t&fs.ModeSymlink != 0:
		default:
			return fmt.Errorf("%s is %s, which does not map onto a pod", p, compose.DescribeMode(t))
		}
		return nil
	})
	return n, err
}

// writeBinds writes the binds' sources as one tar archive, each under its entry.
func writeBinds(w io.Writer, binds []bind) error {
	tw := tar.NewWriter(w)
	var total int64
	for _, b := range binds {
		root := b.source
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r
		}
		if b.missing || b.file {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: b.entry + "/", Mode: 0o755}); err != nil {
				return err
			}
			if b.missing {
				continue
			}
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			name := b.entry + "/file"
			if !b.file {
				rel, _ := filepath.Rel(root, p)
				name = path.Join(b.entry, filepath.ToSlash(rel))
			}
			return addFile(tw, p, name, fi, &total)
		})
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// addFile writes one file's header and content. Owners are numeric: the pod's names are not
// the host's.
func addFile(tw *tar.Writer, p, name string, fi fs.FileInfo, total *int64) error {
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	h.Name, h.Uname, h.Gname = name, "", ""
	if fi.IsDir() {
		h.Name += "/"
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if *total += fi.Size(); *total > BindLimit {
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("binds grew past %d MiB while they were copied", BindLimit>>20))
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	// A file that changed size since its header was written fails the archive, not the pod.
	_, err = io.Copy(tw, io.LimitReader(f, fi.Size()))
	return err
}

// podBinds adds the binds' emptyDir, the init container that receives them and the mounts.
func (b *Backend) podBinds(ctx context.Context, p *types.Project, svc types.ServiceConfig, pod *corev1.Pod) error {
	binds, err := bindsOf(p, svc)
	if err != nil || len(binds) == 0 {
		return err
	}
	ref, err := b.baseRef(ctx)
	if err != nil {
		return err
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: bindsName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	c := &pod.Spec.Containers[0]
	for _, bd := range binds {
		sub := bd.entry
		if bd.file {
			sub += "/file"
		}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: bindsName, MountPath: bd.target, SubPath: sub, ReadOnly: bd.readOnly})
	}
	// Root, to give the files their owners; no capability beyond what unpacking needs.
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{
		Name: bindsName, Image: ref, ImagePullPolicy: corev1.PullIfNotPresent,
		Command:      []string{"sh", "-c", bindsWait},
		VolumeMounts: []corev1.VolumeMount{{Name: bindsName, MountPath: bindsDir}},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: ptr(int64(0)), RunAsGroup: ptr(int64(0)), RunAsNonRoot: ptr(false),
			AllowPrivilegeEscalation: ptr(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"},
				Add: []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"}},
		},
	})
	return nil
}

// deliverBinds copies a service's binds into its pod once the init container runs.
func (b *Backend) deliverBinds(ctx context.Context, w *podWatch, p *types.Project, svc types.ServiceConfig, pod *corev1.Pod) error {
	if !slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == bindsName }) {
		return nil
	}
	binds, err := bindsOf(p, svc)
	if err != nil {
		return err
	}
	delivered, err := b.awaitInit(ctx, w, p, svc.Name, bindsName, "receive its binds")
	if err != nil || delivered {
		return err
	}
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		err := writeBinds(pw, binds)
		pw.CloseWithError(err)
		werr <- err
	}()
	var stderr bytes.Buffer
	code, err := b.execIn(ctx, p.Name, pod.Name, bindsName, []string{"sh", "-c", bindsUnpack}, pr, io.Discard, &limitWriter{w: &stderr, limit: 4 << 10})
	pr.CloseWithError(io.ErrClosedPipe)
	what := fmt.Sprintf("kubernetes up %s: copy the binds of service %s into its pod", p.Name, svc.Name)
	if e := <-werr; e != nil && !errors.Is(e, io.ErrClosedPipe) {
		return fmt.Errorf("%s: %w", what, e)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if code != 0 {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("%s: tar exit code %d: %s", what, code, strings.TrimSpace(stderr.String())))
	}
	return nil
}

// awaitInit waits until service's pod runs its init container name, which waits there to be
// handed something (doing: what, for the error), and says whether it ended well already (an
// earlier attempt of this same Up got there).
func (b *Backend) awaitInit(ctx context.Context, w *podWatch, p *types.Project, service, name, doing string) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, b.start)
	defer cancel()
	done := false
	err := w.until(wctx, func(pods map[string]*corev1.Pod) (bool, error) {
		cur := pods[service]
		if cur == nil {
			return false, nil
		}
		if _, why := podState(cur, false); strings.HasPrefix(why, "FailedScheduling") {
			return false, b.podFailure(context.WithoutCancel(ctx), cur, why)
		}
		for _, s := range cur.Status.InitContainerStatuses {
			switch {
			case s.Name != name:
			case s.State.Running != nil:
				return true, nil
			case s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
				done = true
				return true, nil
			case s.State.Terminated != nil:
				return false, b.podFailure(context.WithoutCancel(ctx), cur, fmt.Sprintf("init container %s failed to %s (exit code %d)", name, doing, s.State.Terminated.ExitCode))
			case s.State.Waiting != nil && slices.Contains(failReasons, s.State.Waiting.Reason):
				return false, b.podFailure(context.WithoutCancel(ctx), cur, s.State.Waiting.Reason+": "+s.State.Waiting.Message)
			}
		}
		return false, nil
	})
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return false, errdefs.Wrap(errdefs.ErrTimeout, err, fmt.Sprintf("kubernetes up %s: service %s: the pod did not start to %s within %s", p.Name, service, doing, b.start))
	}
	return done, err
}

// execIn runs argv in one named container of a pod (the exec calls of exec.go run in the
// service's own) and returns its exit code.
func (b *Backend) execIn(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	ex, err := b.executor(ns, pod, &corev1.PodExecOptions{Container: container, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true})
	if err != nil {
		return 0, err
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	var exit interface{ ExitStatus() int }
	if errors.As(err, &exit) {
		return exit.ExitStatus(), nil
	}
	return 0, err
}

// executor is one exec call's executor: WebSocket, falling back to SPDY.
func (b *Backend) executor(ns, pod string, opts *corev1.PodExecOptions) (remotecommand.Executor, error) {
	req := b.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(opts, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.cfg, http.MethodPost, req.URL())
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
}
