package images_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images"
	"github.com/composebox/composebox/internal/images/imagespec"
	"github.com/composebox/composebox/internal/testutil"
)

func TestBaseImageBuildsOnceAndRuns(t *testing.T) {
	c := testutil.Docker(t)
	b := images.NewBuilder(c)
	ref, err := b.Base(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The second call finds the tag and builds nothing, whether or not the first one built.
	before := b.Builds()
	ref2, err := b.Base(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ref2 != ref || b.Builds() != before {
		t.Fatalf("second Base: ref %s (was %s), builds %d (was %d)", ref2, ref, b.Builds(), before)
	}
	if !strings.HasPrefix(ref, imagespec.BaseRepository+":") {
		t.Errorf("ref %q is not in %s", ref, imagespec.BaseRepository)
	}

	inspect, err := c.ImageInspect(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if inspect.Config.Labels[labels.LabelManaged] != "true" {
		t.Errorf("base image labels %v lack %s", inspect.Config.Labels, labels.LabelManaged)
	}
	if inspect.Config.WorkingDir != imagespec.BaseWorkdir {
		t.Errorf("WorkingDir %q, want %q", inspect.Config.WorkingDir, imagespec.BaseWorkdir)
	}

	for _, tc := range []struct{ user, wantID string }{
		{"", "uid=0(root) gid=0(root)"},
		{imagespec.SandboxUser, "uid=1000(sandbox) gid=1000(sandbox)"},
	} {
		res := testutil.Run(t, c, ref, tc.user, "sh", "-c", "id; ls /bin | wc -l")
		if res.ExitCode != 0 {
			t.Fatalf("as %q: %s", tc.user, res)
		}
		lines := strings.Fields(res.Stdout)
		if !strings.HasPrefix(res.Stdout, tc.wantID) {
			t.Errorf("as %q: id printed %q, want prefix %q", tc.user, res.Stdout, tc.wantID)
		}
		if n, _ := strconv.Atoi(lines[len(lines)-1]); n < 100 {
			t.Errorf("as %q: only %d entries in /bin", tc.user, n)
		}
	}
}

func TestBaseImageLayout(t *testing.T) {
	c := testutil.Docker(t)
	ref := testutil.BaseImage(t)
	script := `stat -c '%a %U' /tmp /workspace /root /home/sandbox; ls /usr/bin/env /sbin/ip >/dev/null && echo links-ok;
touch /tmp/x /workspace/y && echo writable`
	res := testutil.Run(t, c, ref, imagespec.SandboxUser, "sh", "-c", script)
	want := "1777 root\n1777 root\n700 root\n755 sandbox\nlinks-ok\nwritable\n"
	if res.ExitCode != 0 || res.Stdout != want {
		t.Errorf("layout as sandbox:\n got %s\nwant stdout %q", res, want)
	}
	res = testutil.Run(t, c, ref, imagespec.SandboxUser, "sh", "-c", "touch /root/x")
	if res.ExitCode == 0 {
		t.Errorf("sandbox user could write /root: %s", res)
	}
}

// Harnesses add users to a sample (inspect_ai's self-check runs `adduser --help`, then the
// Debian or the BusyBox form): the base image's adduser takes both, and the users it adds run
// commands, own their home and get numbers of their own.
func TestBaseImageAddUser(t *testing.T) {
	c := testutil.Docker(t)
	ref := testutil.BaseImage(t)
	script := `adduser --help | grep -q BusyBox && exit 9
adduser --comment self_check.py --disabled-password deb-user
adduser -D bb-user
adduser -D bb-user 2>/dev/null && exit 8
adduser --comment 'x:0:0:root' evil 2>/dev/null && exit 7
su -s /bin/sh deb-user -c id; su -s /bin/sh bb-user -c 'id; touch ~/mine && stat -c %U ~/mine'`
	res := testutil.Run(t, c, ref, "", "sh", "-c", script)
	want := "uid=1001(deb-user) gid=1001(deb-user) groups=1001(deb-user)\n" +
		"uid=1002(bb-user) gid=1002(bb-user) groups=1002(bb-user)\nbb-user\n"
	if res.ExitCode != 0 || res.Stdout != want {
		t.Errorf("adduser:\n got %s\nwant stdout %q", res, want)
	}
	res = testutil.Run(t, c, ref, imagespec.SandboxUser, "adduser", "-D", "intruder")
	if res.ExitCode == 0 {
		t.Errorf("the non-root user could add a user: %s", res)
	}
}

func TestConcurrentEnsureBuildsOncePerTag(t *testing.T) {
	c := testutil.Docker(t)
	testutil.BaseImage(t) // a FROM of a local image never pulls
	spec := imagespec.Spec{
		Repository: "composebox/test-concurrent",
		Dockerfile: "FROM " + testutil.BaseImage(t) + "\nCOPY hello /hello\n",
		Files:      []imagespec.File{{Name: "hello", Mode: 0o644, Body: []byte(fmt.Sprint(time.Now().UnixNano()))}},
		Labels:     map[string]string{labels.LabelManaged: "true", labels.LabelTask: "test"},
	}
	testutil.RemoveImage(t, c, spec.Tag())
	b := images.NewBuilder(c)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, _, errs[i] = b.Ensure(t.Context(), spec) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if b.Builds() != 1 {
		t.Errorf("%d builds for one tag, want 1", b.Builds())
	}
}

func TestBuildErrorIsReported(t *testing.T) {
	c := testutil.Docker(t)
	spec := imagespec.Spec{Repository: "composebox/test-broken", Dockerfile: "FROM scratch\nCOPY missing /missing\n"}
	testutil.RemoveImage(t, c, spec.Tag())
	_, _, err := images.NewBuilder(c).Ensure(t.Context(), spec)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("err = %v, want a build error naming the missing file", err)
	}
}

func TestTagIsContentAddressed(t *testing.T) {
	a := imagespec.Spec{Repository: "r", Dockerfile: "FROM scratch\n", Files: []imagespec.File{{Name: "f", Body: []byte("1")}}}
	b := a
	b.Files = []imagespec.File{{Name: "f", Body: []byte("2")}}
	if a.Tag() == b.Tag() {
		t.Error("different contents give one tag")
	}
	if a.Tag() != a.Tag() {
		t.Error("tag is not deterministic")
	}
}

// buildMarker is a label unique to one test, put on every image its Dockerfile's steps commit.
func buildMarker(t *testing.T) string {
	return fmt.Sprintf("dev.composebox.test-build=%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}

func TestFailedBuildIsBuildFailedAndLeavesNoImage(t *testing.T) {
	c := testutil.Docker(t)
	base := testutil.BaseImage(t)
	baseID, err := c.ImageInspect(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	marker := buildMarker(t)
	testutil.RemoveLabelledImages(t, c, marker)
	// The failing step prints what the builder prints for a committed step, naming the base
	// image: a build's output must not make composebox remove an image it did not make.
	fake := strings.TrimPrefix(baseID.ID, "sha256:")[:12]
	spec := imagespec.Spec{
		Repository: "composebox/test-failing",
		Dockerfile: "FROM " + base + "\nLABEL " + marker + "\nRUN echo one > /one\nENV X=1\n" +
			"RUN echo ' ---> " + fake + "'; echo boom-output >&2; exit 3\n",
		Labels: map[string]string{labels.LabelManaged: "true", labels.LabelTask: "test"},
	}
	testutil.RemoveImage(t, c, spec.Tag())
	_, _, err = images.NewBuilder(c).Ensure(t.Context(), spec)
	var be *errdefs.BuildError
	if !errors.As(err, &be) || !errors.Is(err, errdefs.ErrBuildFailed) || errdefs.Kind(err) != "build_failed" {
		t.Fatalf("err = %v (kind %s), want a BuildError of kind build_failed", err, errdefs.Kind(err))
	}
	if !strings.Contains(be.Step, "RUN echo ' ---> ") || !strings.HasPrefix(be.Step, "Step ") {
		t.Errorf("step = %q, want the failing RUN step", be.Step)
	}
	if !strings.Contains(be.Log, "boom-output") || !strings.Contains(be.Message, "3") {
		t.Errorf("message %q, log %q: want the exit code and the step's output", be.Message, be.Log)
	}
	if left := testutil.LabelledImages(t, c, marker); len(left) > 0 {
		t.Errorf("the failed build left %d images behind: %v", len(left), left)
	}
	if _, err := c.ImageInspect(t.Context(), baseID.ID); err != nil {
		t.Errorf("the base image is gone after a build printed its ID: %v", err)
	}
}

func TestCancelledBuildStopsAndLeavesNoImage(t *testing.T) {
	c := testutil.Docker(t)
	marker := buildMarker(t)
	testutil.RemoveLabelledImages(t, c, marker)
	spec := imagespec.Spec{
		Repository: "composebox/test-cancelled",
		Dockerfile: "FROM " + testutil.BaseImage(t) + "\nLABEL " + marker + "\nRUN sleep 120\n",
		Labels:     map[string]string{labels.LabelManaged: "true", labels.LabelTask: "test"},
	}
	testutil.RemoveImage(t, c, spec.Tag())
	t.Cleanup(func() { // the step's container, should the builder leave it
		list, _ := c.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", marker))})
		for _, ctr := range list {
			_ = c.ContainerRemove(context.Background(), ctr.ID, container.RemoveOptions{Force: true})
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { _, _, err := images.NewBuilder(c).Ensure(ctx, spec); done <- err }()

	testutil.CancelDuringRunStep(t, c, marker, cancel, done, "build")
}
