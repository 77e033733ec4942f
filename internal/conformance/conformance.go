// Package conformance is the behaviour suite for a sandbox's exec and file operations (argv
// without a shell, stdin, output limits, timeouts, file reads and writes with the sandbox
// user's permissions). It is written against a small interface so that every layer
// that offers those operations (lifecycle/sandboxio directly, orchestrator.Sandbox on top of
// it) runs the very same cases against a real engine.
//
// The sandboxes must run the base image (internal/images: busybox, users root and sandbox
// 1000:1000, working directory /workspace).
package conformance

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/composebox/composebox/lifecycle/sandboxio"
)

// Sandbox is what the suite exercises: one running container of the base image whose
// default user is the one newSandbox was asked for.
type Sandbox interface {
	Exec(ctx context.Context, req sandboxio.ExecRequest) (sandboxio.ExecResult, error)
	ExecStream(ctx context.Context, req sandboxio.ExecRequest) (Process, error)
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte) error
	WriteFileFrom(ctx context.Context, path string, r io.Reader, size int64) error
	ReadFileTo(ctx context.Context, path string, w io.Writer, limit int64) (int64, error)
	// ContainerID lets the suite kill the container underneath the sandbox.
	ContainerID() string
}

// Process is a streaming exec; *sandboxio.Process implements it.
type Process interface {
	Events() <-chan sandboxio.Event
	Wait() (sandboxio.ExecResult, error)
	Poll() *int
	Kill(ctx context.Context) error
}

// Users are the default users the suite runs every case as: a non-root one first, since
// permission semantics are the hard part, then root.
var Users = []string{"sandbox", "root"}

// Case is one behaviour.
type Case struct {
	Name string
	// Fresh cases get a sandbox of their own (they destroy it).
	Fresh bool
	Run   func(t *testing.T, e *Env)
}

// Env is what a case runs against.
type Env struct {
	SB Sandbox
	// User is the sandbox's default user, and UID its uid.
	User string
	UID  int
	// Dir is a directory private to the case, writable by User, under /tmp.
	Dir string

	kill func(t *testing.T, sb Sandbox)
}

// Option tunes Run for a backend.
type Option func(*Env)

// WithKill kills the container under a sandbox, as the "unavailable" cases need, and returns
// once its backend reports it stopped: the default kills a Docker container; other backends
// give their own.
func WithKill(kill func(t *testing.T, sb Sandbox)) Option {
	return func(e *Env) { e.kill = kill }
}

// Root reports whether the default user is root.
func (e *Env) Root() bool { return e.UID == 0 }

// Run runs every case for every user in Users, in parallel within a user. newSandbox must
// return a running sandbox whose default user is user and register its removal with
// t.Cleanup.
func Run(t *testing.T, newSandbox func(t *testing.T, user string) Sandbox, opts ...Option) {
	for _, user := range Users {
		t.Run("user="+user, func(t *testing.T) {
			shared := newSandbox(t, user)
			uid := 1000
			if user == "root" {
				uid = 0
			}
			for _, c := range Cases() {
				t.Run(c.Name, func(t *testing.T) {
					t.Parallel()
					sb := shared
					if c.Fresh {
						sb = newSandbox(t, user)
					}
					e := &Env{SB: sb, User: user, UID: uid, Dir: privateDir(t, sb)}
					for _, o := range opts {
						o(e)
					}
					c.Run(t, e)
				})
			}
		})
	}
}

// privateDir makes an empty directory for one case, as the default user.
func privateDir(t *testing.T, sb Sandbox) string {
	t.Helper()
	dir := "/tmp/cf-" + safeName(t.Name())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, sandboxio.ExecRequest{Cmd: []string{"mkdir", "-p", dir}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("make case directory %s: %v %s", dir, err, res.StderrText())
	}
	return dir
}

func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
