package compose

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
)

// BuildPlan is one service's image build, done once per task.
type BuildPlan struct {
	Service string
	// Tag is cbx-<task>-<service>:<16 hex digits of the content hash>: the same context,
	// Dockerfile and build settings always give the same tag, so an existing image is reused.
	Tag string
	// Context is the absolute build context directory (or a remote URL, as written).
	Context string
	// Dockerfile is the Dockerfile path as compose has it: relative to Context, or absolute.
	Dockerfile string
	// DockerfileInline is the Dockerfile text when the service gives it inline.
	DockerfileInline string
	// Args are the build args, those without a value taken from the project environment as
	// compose does.
	Args map[string]string
	// Target is the build stage, if any.
	Target string
	// Labels go on the image: the service's build labels, then dev.composebox.managed and
	// dev.composebox.task, so that image hygiene can find a task's images.
	Labels map[string]string
	// Build is a copy of the service's whole build section, for building through compose.
	Build *types.BuildConfig
}

// ImagePlan says which images a task needs.
type ImagePlan struct {
	// Builds are the services to build, sorted by service name.
	Builds []BuildPlan
	// Existing are the images of the other services, which must exist locally (or be pulled
	// under a pull policy): sorted, without duplicates.
	Existing []string
}

// hashVersion changes whenever what goes into the hash changes, so old tags are not reused.
const hashVersion = "composebox build hash v1"

// PlanImages is PlanImagesContext without cancellation or task roots.
func PlanImages(proj *types.Project, task string) (ImagePlan, error) {
	return PlanImagesContext(context.Background(), proj, task, PlanOptions{})
}

// PlanOptions configures PlanImagesContext.
type PlanOptions struct {
	// Roots are the directories the builds' files may come from (Policy.TaskRoots); empty
	// means each build's own context and Dockerfile directory (BuildRoots).
	Roots []string
}

// PlanImagesContext lists the images proj needs: a content-hash tag for every service with a
// build section (its image: name, if any, is not used: samples run the tag), and the images the
// other services name. The hash covers the build context as the builder sees it (.dockerignore
// applied), the Dockerfile, and every build setting (args, target, labels, ...). The files are
// read as ReadBuildInput reads them: a Dockerfile or ignore file that is not a regular file
// inside the roots, or a context holding a FIFO, device or socket, is refused. Errors are
// ErrInvalidConfig (ErrPolicyViolation for a file outside the roots); a cancelled ctx stops it.
func PlanImagesContext(ctx context.Context, proj *types.Project, task string, opts PlanOptions) (ImagePlan, error) {
	var plan ImagePlan
	if proj == nil {
		return plan, errdefs.New(ErrInvalidConfig, "plan images: no project given")
	}
	existing := map[string]bool{}
	copied := proj.WithServicesDisabled() // BuildPlan.Build must not alias the caller's project
	for _, name := range proj.ServiceNames() {
		s := proj.Services[name]
		if s.Build == nil {
			if s.Image == "" {
				return plan, errdefs.New(ErrInvalidConfig, fmt.Sprintf("plan images: service %q has neither image nor build", name))
			}
			existing[s.Image] = true
			continue
		}
		bp, err := planBuild(ctx, proj, name, s, task, opts.Roots)
		bp.Build = copied.Services[name].Build
		if err != nil {
			return plan, err
		}
		plan.Builds = append(plan.Builds, bp)
	}
	plan.Existing = slices.Sorted(maps.Keys(existing))
	return plan, nil
}

func planBuild(ctx context.Context, proj *types.Project, name string, s types.ServiceConfig, task string, roots []string) (BuildPlan, error) {
	b := *s.Build
	args := map[string]string{}
	for k, v := range b.Args {
		switch {
		case v != nil:
			args[k] = *v
		default:
			if ev, ok := proj.Environment[k]; ok {
				args[k] = ev
			}
		}
	}
	lbl := map[string]string{}
	maps.Copy(lbl, b.Labels)
	lbl[labels.LabelManaged] = "true"
	lbl[labels.LabelTask] = task

	h := sha256.New()
	fmt.Fprintf(h, "%s\n", hashVersion)
	// Settings: everything but the context's location, which must not change the tag.
	settings := b
	settings.Context, settings.Dockerfile = "", ""
	settings.Args = nil
	settings.Labels = lbl
	js, err := json.Marshal(struct {
		Build *types.BuildConfig
		Args  map[string]string
	}{&settings, args})
	if err != nil {
		return BuildPlan{}, fmt.Errorf("plan image for service %q: %w", name, err)
	}
	fmt.Fprintf(h, "settings %d\n%s\n", len(js), js)

	fail := func(err error) (BuildPlan, error) {
		if ctx.Err() != nil {
			return BuildPlan{}, fmt.Errorf("plan image for service %q: %w", name, ctx.Err())
		}
		if errdefs.Kind(err) != "internal" {
			return BuildPlan{}, fmt.Errorf("plan image for service %q: %w", name, err)
		}
		return BuildPlan{}, errdefs.Wrap(ErrInvalidConfig, err, fmt.Sprintf("plan image for service %q", name))
	}
	if isRemoteContext(b.Context) {
		fmt.Fprintf(h, "remote context %q dockerfile %q\n", b.Context, b.Dockerfile)
	} else {
		in, err := ReadBuildInput(ctx, &b, roots)
		if err != nil {
			return fail(err)
		}
		if b.DockerfileInline == "" {
			if in.DockerfileName != "" {
				fmt.Fprintf(h, "dockerfile %q\n", in.DockerfileName)
			}
			fmt.Fprintf(h, "dockerfile content %d\n", len(in.Dockerfile))
			h.Write(in.Dockerfile)
		}
		if err := hashTree(ctx, h, b.Context, DockerfilePath(&b), b.DockerfileInline != "", roots); err != nil {
			return fail(err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b.AdditionalContexts)) {
		v := b.AdditionalContexts[k]
		if fi, err := os.Stat(v); err == nil && fi.IsDir() && filepath.IsAbs(v) {
			fmt.Fprintf(h, "additional context %q\n", k)
			if err := hashTree(ctx, h, v, "", false, roots); err != nil {
				return fail(err)
			}
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]

	repo := "cbx"
	for _, part := range []string{SanitizeName(task, 40), SanitizeName(name, 60)} {
		if part != "" {
			repo += "-" + part
		}
	}
	repo = strings.ReplaceAll(repo, "_", "-") // a repository component allows '_' only in pairs
	return BuildPlan{
		Service:          name,
		Tag:              repo + ":" + sum,
		Context:          b.Context,
		Dockerfile:       b.Dockerfile,
		DockerfileInline: b.DockerfileInline,
		Args:             args,
		Target:           b.Target,
		Labels:           lbl,
	}, nil
}

// hashFile writes a regular file of the context found by the walk. It is opened without
// blocking, and its type checked again once open, in case it was swapped for a FIFO since.
func hashFile(ctx context.Context, h hash.Hash, what, path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return notRegular(path, fi.Mode())
	}
	fmt.Fprintf(h, "%s %d\n", what, fi.Size())
	if _, err := io.Copy(h, ctxReader{ctx, io.LimitReader(f, fi.Size())}); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// hashTree writes every entry of the build context dir that the builder would receive: path,
// type, permission bits, symlink target and content. Modification times are left out, so a
// fresh checkout hashes like the original. inline says the Dockerfile is inline, so that only
// the context's own ignore file applies.
func hashTree(ctx context.Context, h hash.Hash, dir, dockerfile string, inline bool, roots []string) error {
	if inline {
		dockerfile = ""
	}
	if len(roots) == 0 {
		roots = []string{ResolvePath(dir)}
		if dockerfile != "" {
			roots = append(roots, ResolvePath(filepath.Dir(dockerfile)))
		}
	}
	pm, _, err := readIgnore(dir, dockerfile, roots)
	if err != nil {
		return err
	}
	return walkContext(ctx, dir, pm, func(rel, path string, fi fs.FileInfo) error {
		mode := fi.Mode()
		switch {
		case mode.IsDir():
			fmt.Fprintf(h, "dir %q %o\n", rel, mode.Perm())
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "symlink %q %q\n", rel, target)
		default:
			return hashFile(ctx, h, fmt.Sprintf("file %q %o", rel, mode.Perm()), path)
		}
		return nil
	})
}

// ctxReader stops a long read (a large file of a build context) once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
