package sandboxio_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/composebox/composebox/lifecycle/sandboxio"
)

// The benchmarks compare this package with the baselines in the same run, on one container:
// the bare Engine API sequence for an exec, and the docker CLI (`docker exec`, `docker cp`).
// bench/exec.sh runs them and prints the ratios. None of them asserts on time.

func BenchmarkExecTrue(b *testing.B) {
	target := newTarget(b, "sandbox")
	ctx := context.Background()
	for b.Loop() {
		res, err := sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v, exit %d", err, res.ExitCode)
		}
	}
}

// BenchmarkRawExecTrue is the floor: ExecCreate, ExecAttach, read to EOF, ExecInspect.
func BenchmarkRawExecTrue(b *testing.B) {
	target := newTarget(b, "sandbox")
	ctx := context.Background()
	c := target.Client
	for b.Loop() {
		created, err := c.ContainerExecCreate(ctx, target.Container, container.ExecOptions{
			User: target.User, Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		hr, err := c.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		var out, errb bytes.Buffer
		_, err = stdcopy.StdCopy(&out, &errb, hr.Reader)
		hr.Close()
		if err != nil {
			b.Fatal(err)
		}
		ins, err := c.ContainerExecInspect(ctx, created.ID)
		if err != nil || ins.ExitCode != 0 {
			b.Fatalf("inspect: %v, exit %d", err, ins.ExitCode)
		}
	}
}

func BenchmarkDockerExecCLI(b *testing.B) {
	target := newTarget(b, "sandbox")
	docker := dockerCLI(b)
	for b.Loop() {
		if out, err := exec.Command(docker, "exec", "-u", target.User, target.Container, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v: %s", err, out)
		}
	}
}

const tenMiB = 10 << 20

func BenchmarkWriteReadFile10MiB(b *testing.B) {
	target := newTarget(b, "sandbox")
	ctx := context.Background()
	data := make([]byte, tenMiB)
	_, _ = rand.Read(data)
	b.SetBytes(2 * tenMiB)
	for b.Loop() {
		if err := sandboxio.WriteFile(ctx, target, "/tmp/bench.bin", data); err != nil {
			b.Fatal(err)
		}
		got, err := sandboxio.ReadFile(ctx, target, "/tmp/bench.bin", 0)
		if err != nil || len(got) != tenMiB {
			b.Fatalf("read: %d bytes, %v", len(got), err)
		}
	}
}

// BenchmarkDockerCp10MiB is `docker cp` both ways (the CLI packs and unpacks the tar itself).
func BenchmarkDockerCp10MiB(b *testing.B) {
	target := newTarget(b, "sandbox")
	docker := dockerCLI(b)
	dir := b.TempDir()
	src := filepath.Join(dir, "bench.bin")
	data := make([]byte, tenMiB)
	_, _ = rand.Read(data)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(dir, "back.bin")
	b.SetBytes(2 * tenMiB)
	for b.Loop() {
		if out, err := exec.Command(docker, "cp", src, target.Container+":/tmp/bench.bin").CombinedOutput(); err != nil {
			b.Fatalf("docker cp in: %v: %s", err, out)
		}
		if out, err := exec.Command(docker, "cp", target.Container+":/tmp/bench.bin", dst).CombinedOutput(); err != nil {
			b.Fatalf("docker cp out: %v: %s", err, out)
		}
	}
}

// BenchmarkReadFileTo1GiB streams a 1 GiB file to io.Discard and reports this process's peak
// RSS (getrusage) and the Go heap's peak, to show that memory does not grow with the file.
// It writes 1 GiB into a container first, so it runs only with COMPOSEBOX_BENCH_1GIB=1; run
// it alone (bench/exec.sh does) so that the peak RSS is its own.
func BenchmarkReadFileTo1GiB(b *testing.B) {
	if os.Getenv("COMPOSEBOX_BENCH_1GIB") == "" {
		b.Skip("set COMPOSEBOX_BENCH_1GIB=1 to stream a 1 GiB file")
	}
	target := newTarget(b, "sandbox")
	ctx := context.Background()
	res, err := sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"dd", "if=/dev/zero", "of=/tmp/1g", "bs=1048576", "count=1024"}})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("make 1 GiB file: %v %s", err, res.StderrText())
	}
	runtime.GC()
	before := maxRSS()
	b.SetBytes(1 << 30)
	var peakHeap uint64
	for b.Loop() {
		n, err := sandboxio.ReadFileTo(ctx, target, "/tmp/1g", io.Discard, 2<<30)
		if err != nil || n != 1<<30 {
			b.Fatalf("read: %d bytes, %v", n, err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapSys)
	}
	b.ReportMetric(float64(maxRSS())/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(before)/(1<<20), "rss-before-MiB")
	b.ReportMetric(float64(peakHeap)/(1<<20), "heap-sys-MiB")
}

// maxRSS is this process's peak resident set size in bytes.
func maxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}

func dockerCLI(b *testing.B) string {
	p, err := exec.LookPath("docker")
	if err != nil {
		b.Skip("no docker CLI for the baseline")
	}
	return p
}
