package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/lifecycle/sandboxio"
)

// workdir is the base image's working directory.
const workdir = "/workspace"

// Cases is the whole suite.
func Cases() []Case {
	var cs []Case
	cs = append(cs, fileCases()...)
	cs = append(cs, guaranteeCases()...)
	cs = append(cs, execCases()...)
	cs = append(cs, stdinCases()...)
	cs = append(cs, streamCases()...)
	cs = append(cs, failureCases()...)
	return cs
}

func fileCases() []Case {
	return []Case{
		{Name: "file/text", Run: func(t *testing.T, e *Env) {
			roundTrip(t, e, e.Dir+"/a.txt", []byte("hello\nworld\n"))
		}},
		{Name: "file/utf8", Run: func(t *testing.T, e *Env) {
			data := []byte("héllo wörld ✓ 日本語 🚀\n")
			roundTrip(t, e, e.Dir+"/u.txt", data)
			// The bytes in the container are the UTF-8 encoding, not a re-encoding.
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"wc", "-c", e.Dir + "/u.txt"}})
			if !strings.HasPrefix(strings.TrimSpace(res.StdoutText()), strconv.Itoa(len(data))) {
				t.Fatalf("wc -c: %q, want %d bytes", res.StdoutText(), len(data))
			}
		}},
		{Name: "file/binary", Run: func(t *testing.T, e *Env) {
			data := make([]byte, 0, 4*256)
			for range 4 {
				for b := range 256 {
					data = append(data, byte(b))
				}
			}
			data = append(data, 0, 0, '\r', '\n', 0xff, 0xfe)
			roundTrip(t, e, e.Dir+"/b.bin", data)
		}},
		{Name: "file/50MiB", Run: func(t *testing.T, e *Env) {
			data := bigData()
			p := e.Dir + "/big.bin"
			write(t, e, p, data)
			sum := sha256.Sum256(data)
			res := sh(t, e, `sha256sum "$1"`, p)
			if !strings.HasPrefix(res.StdoutText(), hex.EncodeToString(sum[:])) {
				t.Fatalf("sha256 in the container %q, want %x", res.StdoutText(), sum)
			}
			got, err := e.SB.ReadFile(ctxFor(t), p, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("read back: %s", diff(got, data))
			}
		}},
		{Name: "file/absolute-new-parents", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/x/y/z/deep.txt"
			roundTrip(t, e, p, []byte("deep"))
			res := sh(t, e, `stat -c '%u %a' "$1"`, e.Dir+"/x/y")
			if got := strings.Fields(res.StdoutText()); got[0] != strconv.Itoa(e.UID) {
				t.Fatalf("new parent directory owned by %s, want uid %d", got[0], e.UID)
			}
		}},
		{Name: "file/relative-new-parents", Run: func(t *testing.T, e *Env) {
			rel := "rel-" + safeName(t.Name()) + "/sub dir/r.txt"
			write(t, e, rel, []byte("relative"))
			// Relative paths resolve against the working directory.
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"cat", workdir + "/" + rel}})
			if res.ExitCode != 0 || res.StdoutText() != "relative" {
				t.Fatalf("cat %s: exit %d, %q %q", workdir+"/"+rel, res.ExitCode, res.StdoutText(), res.StderrText())
			}
			if got := string(read(t, e, rel)); got != "relative" {
				t.Fatalf("read %s: %q", rel, got)
			}
			if got := string(read(t, e, "./"+rel)); got != "relative" {
				t.Fatalf("read ./%s: %q", rel, got)
			}
		}},
		{Name: "file/zero-length", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/empty"
			roundTrip(t, e, p, nil)
			write(t, e, p, []byte("not empty"))
			write(t, e, p, []byte{})
			if got := read(t, e, p); len(got) != 0 {
				t.Fatalf("read after overwrite with nothing: %q", got)
			}
			res := sh(t, e, `wc -c <"$1"`, p)
			if strings.TrimSpace(res.StdoutText()) != "0" {
				t.Fatalf("wc -c: %q", res.StdoutText())
			}
		}},
		{Name: "file/spaces-and-odd-names", Run: func(t *testing.T, e *Env) {
			for _, name := range []string{"with space.txt", "  lead and trail  ", "quote'\"s", "dollar$HOME;rm -rf", "-dash", "ünï cödé"} {
				roundTrip(t, e, e.Dir+"/odd dir/"+name, []byte(name))
			}
		}},
		{Name: "file/overwrite", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/o.txt"
			write(t, e, p, []byte("a much longer first version\n"))
			write(t, e, p, []byte("short"))
			if got := string(read(t, e, p)); got != "short" {
				t.Fatalf("after overwrite: %q", got)
			}
		}},
		{Name: "file/ownership", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/own/o.txt"
			write(t, e, p, []byte("x"))
			res := sh(t, e, `stat -c '%u:%g' "$1" "${1%/*}"`, p)
			want := fmt.Sprintf("%d:%d\n%d:%d\n", e.UID, e.UID, e.UID, e.UID)
			if res.StdoutText() != want {
				t.Fatalf("owner of file and new parent: %q, want %q", res.StdoutText(), want)
			}
		}},
		{Name: "file/symlink-followed", Run: func(t *testing.T, e *Env) {
			sh(t, e, `cd "$1" && mkdir real && echo target >real/t.txt && ln -s real/t.txt rel-link && ln -s "$1/real/t.txt" abs-link && ln -s real dir-link`, e.Dir)
			for _, l := range []string{"rel-link", "abs-link", "dir-link/t.txt"} {
				if got := string(read(t, e, e.Dir+"/"+l)); got != "target\n" {
					t.Fatalf("read %s: %q", l, got)
				}
			}
			// Writing through a link writes the target.
			write(t, e, e.Dir+"/rel-link", []byte("through"))
			if got := string(read(t, e, e.Dir+"/real/t.txt")); got != "through" {
				t.Fatalf("target after write through link: %q", got)
			}
		}},
		{Name: "file/read-not-found", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/missing/nope.txt"
			_, err := e.SB.ReadFile(ctxFor(t), p, 0)
			wantErr(t, err, errdefs.ErrNotFound, p)
			wantErr(t, err, fs.ErrNotExist, p)
			_, err = e.SB.ReadFile(ctxFor(t), "missing-relative.txt", 0)
			wantErr(t, err, errdefs.ErrNotFound, "missing-relative.txt")
		}},
		{Name: "file/read-dangling-symlink", Run: func(t *testing.T, e *Env) {
			sh(t, e, `ln -s "$1/nowhere" "$1/dangling"`, e.Dir)
			_, err := e.SB.ReadFile(ctxFor(t), e.Dir+"/dangling", 0)
			wantErr(t, err, fs.ErrNotExist, e.Dir+"/dangling")
		}},
		{Name: "file/read-through-non-directory", Run: func(t *testing.T, e *Env) {
			write(t, e, e.Dir+"/plain", []byte("x"))
			_, err := e.SB.ReadFile(ctxFor(t), e.Dir+"/plain/child", 0)
			wantErr(t, err, errdefs.ErrNotFound, e.Dir+"/plain/child")
		}},
		{Name: "file/read-directory", Run: func(t *testing.T, e *Env) {
			_, err := e.SB.ReadFile(ctxFor(t), e.Dir, 0)
			wantErr(t, err, errdefs.ErrIsDirectory, e.Dir)
		}},
		{Name: "file/write-directory", Run: func(t *testing.T, e *Env) {
			sh(t, e, `mkdir "$1/d"`, e.Dir)
			err := e.SB.WriteFile(ctxFor(t), e.Dir+"/d", []byte("x"))
			wantErr(t, err, errdefs.ErrIsDirectory, e.Dir+"/d")
		}},
		{Name: "file/read-permission", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/secret"
			rootSh(t, e, `echo secret >"$1" && chown 0:0 "$1" && chmod 600 "$1"`, p)
			got, err := e.SB.ReadFile(ctxFor(t), p, 0)
			if e.Root() {
				if err != nil || string(got) != "secret\n" {
					t.Fatalf("root reads a 600 file: %q, %v", got, err)
				}
				return
			}
			wantErr(t, err, errdefs.ErrPermission, p)
			wantErr(t, err, fs.ErrPermission, p)
		}},
		{Name: "file/read-unsearchable-directory", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/locked/f.txt"
			rootSh(t, e, `mkdir -p "${1%/*}" && echo x >"$1" && chown -R 0:0 "${1%/*}" && chmod 700 "${1%/*}"`, p)
			_, err := e.SB.ReadFile(ctxFor(t), p, 0)
			if e.Root() {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, errdefs.ErrPermission, p)
		}},
		{Name: "file/write-permission", Run: func(t *testing.T, e *Env) {
			p := "/etc/cf-" + safeName(t.Name())
			err := e.SB.WriteFile(ctxFor(t), p, []byte("x"))
			if e.Root() {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, errdefs.ErrPermission, p)
			wantErr(t, err, fs.ErrPermission, p)
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"test", "-e", p}})
			if res.ExitCode == 0 {
				t.Fatalf("%s exists after a denied write", p)
			}
		}},
		{Name: "file/write-readonly-file", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/ro.txt"
			rootSh(t, e, `echo original >"$1" && chown 0:0 "$1" && chmod 644 "$1"`, p)
			err := e.SB.WriteFile(ctxFor(t), p, []byte("changed"))
			if e.Root() {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, errdefs.ErrPermission, p)
			res := rootSh(t, e, `cat "$1"`, p)
			if res.StdoutText() != "original\n" {
				t.Fatalf("file changed by a denied write: %q", res.StdoutText())
			}
		}},
		{Name: "file/write-parent-permission", Run: func(t *testing.T, e *Env) {
			p := "/root/cf-" + safeName(t.Name()) + "/sub/f.txt"
			err := e.SB.WriteFile(ctxFor(t), p, []byte("x"))
			if e.Root() {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, errdefs.ErrPermission, p)
		}},
		{Name: "file/write-under-file", Run: func(t *testing.T, e *Env) {
			write(t, e, e.Dir+"/plain", []byte("x"))
			p := e.Dir + "/plain/sub/f.txt"
			err := e.SB.WriteFile(ctxFor(t), p, []byte("x"))
			wantErr(t, err, errdefs.ErrNotFound, p)
		}},
		{Name: "file/read-limit", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/limited"
			write(t, e, p, bytes.Repeat([]byte("0123456789"), 100))
			_, err := e.SB.ReadFile(ctxFor(t), p, 999)
			wantErr(t, err, errdefs.ErrOutputLimit, p)
			got, err := e.SB.ReadFile(ctxFor(t), p, 1000)
			if err != nil || len(got) != 1000 {
				t.Fatalf("read at exactly the limit: %d bytes, %v", len(got), err)
			}
			// A file far larger than the limit fails fast, without reading it all.
			huge := e.Dir + "/huge"
			if res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "head -c 67108864 /dev/zero > " + huge}}); res.ExitCode != 0 {
				t.Fatalf("write %s: %+v", huge, res)
			}
			start := time.Now()
			_, err = e.SB.ReadFile(ctxFor(t), huge, 1<<20)
			wantErr(t, err, errdefs.ErrOutputLimit, huge)
			if d := time.Since(start); d > 30*time.Second {
				t.Fatalf("limit on a 64 MiB file took %s", d)
			}
			waitGone(t, e, "cat -- "+huge)
			// An endless one is not a regular file: refused before it is opened.
			_, err = e.SB.ReadFile(ctxFor(t), "/dev/zero", 1<<20)
			wantErr(t, err, errdefs.ErrInvalidConfig, "/dev/zero")
		}},
	}
}

func execCases() []Case {
	return []Case{
		{Name: "exec/stdout-stderr", Run: func(t *testing.T, e *Env) {
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "printf out1; printf err1 >&2; printf out2; printf err2 >&2"}})
			if res.StdoutText() != "out1out2" || res.StderrText() != "err1err2" || res.ExitCode != 0 {
				t.Fatalf("got exit %d, stdout %q, stderr %q", res.ExitCode, res.StdoutText(), res.StderrText())
			}
			if res.StdoutBytes != 8 || res.StderrBytes != 8 || res.StdoutTruncated || res.StderrTruncated {
				t.Fatalf("counts %d/%d, truncated %t/%t", res.StdoutBytes, res.StderrBytes, res.StdoutTruncated, res.StderrTruncated)
			}
		}},
		{Name: "exec/utf8-output", Run: func(t *testing.T, e *Env) {
			// Bytes made inside the container, so nothing on the way can have re-encoded them.
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"printf", `\303\251\342\234\223\360\237\232\200`}})
			if res.StdoutText() != "é✓🚀" {
				t.Fatalf("stdout %q", res.StdoutText())
			}
			res = run(t, e, sandboxio.ExecRequest{Cmd: []string{"sh", "-c", `printf '\342\234\227' >&2`}})
			if res.StderrText() != "✗" {
				t.Fatalf("stderr %q", res.StderrText())
			}
		}},
		{Name: "exec/non-utf8-output", Run: func(t *testing.T, e *Env) {
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"printf", `a\377b\300\200c`}})
			if want := []byte("a\xffb\xc0\x80c"); !bytes.Equal(res.Stdout, want) {
				t.Fatalf("raw stdout %q, want %q", res.Stdout, want)
			}
			if got := res.StdoutText(); got != "a\uFFFDb\uFFFD\uFFFDc" {
				t.Fatalf("text %q", got)
			}
		}},
		{Name: "exec/binary-output", Run: func(t *testing.T, e *Env) {
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"printf", `\000\001\002\377\000\r\n`}})
			if want := []byte{0, 1, 2, 0xff, 0, '\r', '\n'}; !bytes.Equal(res.Stdout, want) {
				t.Fatalf("stdout %q, want %q", res.Stdout, want)
			}
		}},
		{Name: "exec/exit-codes", Run: func(t *testing.T, e *Env) {
			for _, code := range []int{0, 1, 2, 3, 42, 124, 125, 126, 127, 255} {
				res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "exit " + strconv.Itoa(code)}, Timeout: time.Minute})
				if res.ExitCode != code {
					t.Fatalf("exit %d: got %d", code, res.ExitCode)
				}
			}
		}},
		{Name: "exec/timeout-kills-tree", Run: func(t *testing.T, e *Env) {
			// A background child, a setsid'd grandchild and a double fork: all must go.
			script := `sleep 3131 & setsid sleep 3132 & (sleep 3133 &) ; echo started; echo oops >&2; wait`
			start := time.Now()
			res, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"sh", "-c", script}, Timeout: time.Second})
			wantErr(t, err, errdefs.ErrTimeout, "")
			wantErr(t, err, context.DeadlineExceeded, "")
			if d := time.Since(start); d < time.Second {
				t.Fatalf("returned after %s, before the timeout", d)
			}
			var xe *sandboxio.ExecError
			if !errors.As(err, &xe) || xe.Result.StdoutText() != "started\n" || xe.Result.StderrText() != "oops\n" {
				t.Fatalf("partial output missing from the error: %#v", err)
			}
			if res.StdoutText() != "started\n" {
				t.Fatalf("partial stdout %q", res.StdoutText())
			}
			waitGone(t, e, "sleep 3131", "sleep 3132", "sleep 3133")
		}},
		{Name: "exec/self-sigterm-is-not-timeout", Run: func(t *testing.T, e *Env) {
			res, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "kill -TERM $$"}, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatalf("a command that kills itself is not a timeout: %v", err)
			}
			if res.ExitCode != 143 {
				t.Fatalf("exit %d, want 143", res.ExitCode)
			}
			// Nor is busybox timeout's own 143, nor 124 or 137 within the deadline.
			res, err = e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"timeout", "-s", "KILL", "1", "sleep", "30"}, Timeout: 30 * time.Second})
			if err != nil || res.ExitCode == 0 {
				t.Fatalf("inner timeout: exit %d, %v", res.ExitCode, err)
			}
		}},
		{Name: "exec/not-executable", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/script.txt"
			write(t, e, p, []byte("#!/bin/sh\necho hi\n"))
			res, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{p}})
			wantErr(t, err, errdefs.ErrPermission, p)
			wantErr(t, err, fs.ErrPermission, p)
			if res.ExitCode != 126 {
				t.Fatalf("exit %d, want 126", res.ExitCode)
			}
			_, err = e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"/tmp"}})
			wantErr(t, err, errdefs.ErrPermission, "/tmp")
		}},
		{Name: "exec/missing-binary", Run: func(t *testing.T, e *Env) {
			for _, cmd := range []string{"no-such-binary-xyz", "/no/such/binary", "./no-such-relative"} {
				res, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{cmd, "arg"}})
				if err != nil {
					t.Fatalf("%s: a missing binary is a result, not an error: %v", cmd, err)
				}
				if res.ExitCode != 127 {
					t.Fatalf("%s: exit %d, want 127", cmd, res.ExitCode)
				}
				if !strings.Contains(res.StderrText(), cmd) || len(res.Stdout) != 0 {
					t.Fatalf("%s: stdout %q, stderr %q", cmd, res.StdoutText(), res.StderrText())
				}
			}
		}},
		{Name: "exec/env", Run: func(t *testing.T, e *Env) {
			env := map[string]string{
				"FOO":       "bar",
				"SPACED":    "a b  c",
				"META":      `$HOME;$(id) "q" 'q' \n`,
				"EMPTY":     "",
				"UNICODE_V": "ünïcödé ✓",
				"MULTILINE": "one\ntwo",
			}
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"env"}, Env: env})
			lines := res.StdoutText()
			for k, v := range env {
				if !strings.Contains(lines, k+"="+v+"\n") {
					t.Fatalf("env lacks %s=%q:\n%s", k, v, lines)
				}
			}
			// The container's own environment is still there.
			if !strings.Contains(lines, "PATH=") {
				t.Fatalf("PATH lost:\n%s", lines)
			}
			res = run(t, e, sandboxio.ExecRequest{Cmd: []string{"sh", "-c", `printf %s "$FOO"`}, Env: map[string]string{"FOO": "override"}})
			if res.StdoutText() != "override" {
				t.Fatalf("FOO %q", res.StdoutText())
			}
		}},
		{Name: "exec/large-argv", Run: func(t *testing.T, e *Env) {
			args := make([]string, 0, 1024)
			total := 0
			for i := range 1024 {
				a := strings.Repeat(string(rune('a'+i%26)), 1000) + strconv.Itoa(i)
				args = append(args, a)
				total += len(a)
			}
			res := run(t, e, sandboxio.ExecRequest{Cmd: append([]string{"sh", "-c", `n=0; for a; do n=$((n+${#a})); done; echo "$# $n $1"`, "sh"}, args...), OutputLimit: 1 << 20})
			want := fmt.Sprintf("%d %d %s\n", len(args), total, args[0])
			if res.ExitCode != 0 || res.StdoutText() != want {
				t.Fatalf("exit %d, stdout %.80q, want %.80q; stderr %q", res.ExitCode, res.StdoutText(), want, res.StderrText())
			}
		}},
		{Name: "exec/users", Run: func(t *testing.T, e *Env) {
			id := func(user string) string {
				res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "echo $(id -u):$(id -g)"}, User: user})
				return strings.TrimSpace(res.StdoutText())
			}
			if got, want := id(""), fmt.Sprintf("%d:%d", e.UID, e.UID); got != want {
				t.Fatalf("default user is %s, want %s", got, want)
			}
			for user, want := range map[string]string{"root": "0:0", "sandbox": "1000:1000", "0": "0:0", "1000": "1000:1000", "1000:0": "1000:0", "4242:4242": "4242:4242"} {
				if got := id(user); got != want {
					t.Fatalf("user %q: got %s, want %s", user, got, want)
				}
			}
		}},
		{Name: "exec/unknown-user", Run: func(t *testing.T, e *Env) {
			res, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"true"}, User: "no-such-user-xyz"})
			if err != nil {
				t.Fatalf("an unknown user is a failed result, not an error: %v", err)
			}
			if res.ExitCode == 0 {
				t.Fatal("exit 0 for an unknown user")
			}
			if !strings.Contains(res.StdoutText()+res.StderrText(), "no-such-user-xyz") {
				t.Fatalf("output does not name the user: %q %q", res.StdoutText(), res.StderrText())
			}
		}},
		{Name: "exec/cwd", Run: func(t *testing.T, e *Env) {
			pwd := func(cwd string) string {
				res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"pwd"}, Cwd: cwd})
				if res.ExitCode != 0 {
					t.Fatalf("pwd in %q: exit %d %q", cwd, res.ExitCode, res.StderrText())
				}
				return strings.TrimSpace(res.StdoutText())
			}
			sub := "cwd-" + safeName(t.Name())
			sh(t, e, `mkdir -p "$1/inner"`, workdir+"/"+sub)
			for cwd, want := range map[string]string{
				"":                    workdir,
				"/":                   "/",
				e.Dir:                 e.Dir,
				sub:                   workdir + "/" + sub,
				"./" + sub + "/inner": workdir + "/" + sub + "/inner",
				sub + "/inner/..":     workdir + "/" + sub,
				"../tmp":              "/tmp",
				"/tmp/../etc/":        "/etc",
			} {
				if got := pwd(cwd); got != want {
					t.Fatalf("cwd %q: pwd %q, want %q", cwd, got, want)
				}
			}
		}},
		{Name: "exec/cwd-missing", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/no-such-dir"
			_, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"pwd"}, Cwd: p})
			wantErr(t, err, errdefs.ErrNotFound, p)
		}},
		{Name: "exec/output-cap-keeps-tail", Run: func(t *testing.T, e *Env) {
			full := seq(20000) // 108894 bytes
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"seq", "20000"}, OutputLimit: 1000})
			if !res.StdoutTruncated || res.StdoutBytes != int64(len(full)) {
				t.Fatalf("truncated %t, total %d, want true and %d", res.StdoutTruncated, res.StdoutBytes, len(full))
			}
			if !bytes.Equal(res.Stdout, full[len(full)-1000:]) {
				t.Fatalf("kept %q..., want the last 1000 bytes", res.Stdout[:min(40, len(res.Stdout))])
			}
			if res.StderrTruncated {
				t.Fatal("stderr marked truncated")
			}
			// stderr is capped on its own.
			res = run(t, e, sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "seq 20000 >&2; echo small"}, OutputLimit: 1000})
			if !res.StderrTruncated || res.StdoutTruncated || res.StdoutText() != "small\n" || !bytes.Equal(res.Stderr, full[len(full)-1000:]) {
				t.Fatalf("stderr truncated %t (%d bytes kept), stdout %q", res.StderrTruncated, len(res.Stderr), res.StdoutText())
			}
			// The default cap is 10 MiB.
			res = run(t, e, sandboxio.ExecRequest{Cmd: []string{"head", "-c", strconv.Itoa(10<<20 + 5), "/dev/zero"}})
			if !res.StdoutTruncated || len(res.Stdout) != 10<<20 || res.StdoutBytes != 10<<20+5 {
				t.Fatalf("default cap: truncated %t, kept %d, total %d", res.StdoutTruncated, len(res.Stdout), res.StdoutBytes)
			}
		}},
		{Name: "exec/strict-limit", Run: func(t *testing.T, e *Env) {
			start := time.Now()
			res, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "exec yes strict-limit-mark"}, OutputLimit: 4096, StrictLimit: true})
			wantErr(t, err, errdefs.ErrOutputLimit, "")
			if len(res.Stdout) != 4096 || !bytes.HasPrefix(res.Stdout, []byte("strict-limit-mark\n")) {
				t.Fatalf("kept %d bytes: %.40q", len(res.Stdout), res.Stdout)
			}
			if time.Since(start) > 30*time.Second {
				t.Fatal("an endless writer was not stopped at the limit")
			}
			waitGone(t, e, "yes strict-limit-mark")
			// Within the limit, strict changes nothing.
			res, err = e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"echo", "ok"}, OutputLimit: 4096, StrictLimit: true})
			if err != nil || res.StdoutText() != "ok\n" {
				t.Fatalf("strict within the limit: %q %v", res.StdoutText(), err)
			}
		}},
		{Name: "exec/concurrent-32", Run: func(t *testing.T, e *Env) {
			var wg sync.WaitGroup
			errs := make(chan error, 32)
			for i := range 32 {
				wg.Go(func() {
					want := fmt.Sprintf("job %d\n", i)
					res, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{
						Cmd:   []string{"sh", "-c", `cat; echo "job $N" >&2; exit $N`},
						Stdin: []byte(want), Env: map[string]string{"N": strconv.Itoa(i)},
					})
					switch {
					case err != nil:
						errs <- err
					case res.StdoutText() != want || res.StderrText() != want || res.ExitCode != i:
						errs <- fmt.Errorf("job %d: exit %d, stdout %q, stderr %q", i, res.ExitCode, res.StdoutText(), res.StderrText())
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		}},
	}
}

func stdinCases() []Case {
	echo := func(t *testing.T, e *Env, in []byte) {
		t.Helper()
		res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"cat"}, Stdin: in})
		if !bytes.Equal(res.Stdout, in) || res.ExitCode != 0 {
			t.Fatalf("cat of stdin: exit %d, %s", res.ExitCode, diff(res.Stdout, in))
		}
	}
	return []Case{
		{Name: "stdin/text", Run: func(t *testing.T, e *Env) {
			echo(t, e, []byte("line one\nline two\n"))
		}},
		{Name: "stdin/empty-is-closed", Run: func(t *testing.T, e *Env) {
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "if read -r x; then echo got; else echo eof; fi"}, Timeout: 30 * time.Second})
			if res.StdoutText() != "eof\n" {
				t.Fatalf("stdout %q", res.StdoutText())
			}
			res = run(t, e, sandboxio.ExecRequest{Cmd: []string{"cat"}, Stdin: []byte{}, Timeout: 30 * time.Second})
			if len(res.Stdout) != 0 || res.ExitCode != 0 {
				t.Fatalf("cat with empty stdin: %q, exit %d", res.Stdout, res.ExitCode)
			}
		}},
		{Name: "stdin/shell-metacharacters", Run: func(t *testing.T, e *Env) {
			echo(t, e, []byte("$(touch /tmp/pwned) `id` ; | & > < * ? ~ ' \" \\ \x04 EOF\n$HOME ${PATH}\n"))
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"test", "-e", "/tmp/pwned"}})
			if res.ExitCode == 0 {
				t.Fatal("stdin was interpreted by a shell")
			}
		}},
		{Name: "stdin/binary-with-nuls", Run: func(t *testing.T, e *Env) {
			in := []byte{0, 0, 1, 0xff, 0, 0x1a, 0x04, '\n', 0, 0x80}
			echo(t, e, in)
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"wc", "-c"}, Stdin: in})
			if strings.TrimSpace(res.StdoutText()) != strconv.Itoa(len(in)) {
				t.Fatalf("wc -c %q", res.StdoutText())
			}
		}},
		{Name: "stdin/50MiB", Run: func(t *testing.T, e *Env) {
			in := bigData()
			sum := sha256.Sum256(in)
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"sha256sum"}, Stdin: in})
			if !strings.HasPrefix(res.StdoutText(), hex.EncodeToString(sum[:])) {
				t.Fatalf("sha256 of stdin %q, want %x", res.StdoutText(), sum)
			}
			// Echoed back while it is still being written: no deadlock at any size.
			res = run(t, e, sandboxio.ExecRequest{Cmd: []string{"cat"}, Stdin: in, OutputLimit: len(in)})
			if !bytes.Equal(res.Stdout, in) {
				t.Fatalf("cat of 50 MiB: %s", diff(res.Stdout, in))
			}
		}},
		{Name: "stdin/unread-by-command", Run: func(t *testing.T, e *Env) {
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"echo", "ignored"}, Stdin: bigData()[:8<<20], Timeout: time.Minute})
			if res.StdoutText() != "ignored\n" || res.ExitCode != 0 {
				t.Fatalf("stdout %q exit %d", res.StdoutText(), res.ExitCode)
			}
		}},
	}
}

func streamCases() []Case {
	return []Case{
		{Name: "stream/chunks-before-end", Run: func(t *testing.T, e *Env) {
			p, err := e.SB.ExecStream(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "echo first; echo second >&2; exec sleep 3141"}})
			if err != nil {
				t.Fatal(err)
			}
			got := map[sandboxio.StreamKind]string{}
			for got[sandboxio.Stdout] != "first\n" || got[sandboxio.Stderr] != "second\n" {
				select {
				case ev, ok := <-p.Events():
					if !ok {
						t.Fatalf("events closed early: %q", got)
					}
					got[ev.Stream] += string(ev.Data)
				case <-time.After(30 * time.Second):
					t.Fatalf("no output while the command runs: %q", got)
				}
			}
			if code := p.Poll(); code != nil {
				t.Fatalf("Poll = %d while the command runs", *code)
			}
			if err := p.Kill(ctxFor(t)); err != nil {
				t.Fatal(err)
			}
			res, err := p.Wait()
			if err != nil {
				t.Fatalf("wait after kill: %v", err)
			}
			if res.ExitCode == 0 || p.Poll() == nil || *p.Poll() != res.ExitCode {
				t.Fatalf("after kill: exit %d, poll %v", res.ExitCode, p.Poll())
			}
			waitGone(t, e, "sleep 3141")
		}},
		{Name: "stream/poll-exit-code", Run: func(t *testing.T, e *Env) {
			p, err := e.SB.ExecStream(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "echo out; exit 7"}})
			if err != nil {
				t.Fatal(err)
			}
			var out []byte
			for ev := range p.Events() {
				out = append(out, ev.Data...)
			}
			res, err := p.Wait()
			if err != nil || res.ExitCode != 7 || string(out) != "out\n" || res.StdoutText() != "out\n" {
				t.Fatalf("exit %d, events %q, stdout %q, %v", res.ExitCode, out, res.StdoutText(), err)
			}
			if code := p.Poll(); code == nil || *code != 7 {
				t.Fatalf("Poll = %v, want 7", code)
			}
		}},
		{Name: "stream/cancel-kills", Run: func(t *testing.T, e *Env) {
			ctx, cancel := context.WithCancel(ctxFor(t))
			defer cancel()
			p, err := e.SB.ExecStream(ctx, sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "sleep 3151 & echo up; wait"}})
			if err != nil {
				t.Fatal(err)
			}
			ev := <-p.Events()
			if string(ev.Data) != "up\n" {
				t.Fatalf("first chunk %q", ev.Data)
			}
			cancel()
			for range p.Events() {
			}
			_, err = p.Wait()
			wantErr(t, err, context.Canceled, "")
			waitGone(t, e, "sleep 3151")
		}},
		{Name: "stream/timeout", Run: func(t *testing.T, e *Env) {
			p, err := e.SB.ExecStream(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "echo tick; exec sleep 3161"}, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var out []byte
			for ev := range p.Events() {
				out = append(out, ev.Data...)
			}
			res, err := p.Wait()
			wantErr(t, err, errdefs.ErrTimeout, "")
			if string(out) != "tick\n" || res.StdoutText() != "tick\n" {
				t.Fatalf("events %q, stdout %q", out, res.StdoutText())
			}
			waitGone(t, e, "sleep 3161")
		}},
		{Name: "stream/unread-events-then-kill", Run: func(t *testing.T, e *Env) {
			// Nobody reads Events: the command never blocks on them, and Kill ends it.
			p, err := e.SB.ExecStream(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "exec yes stream-unread-mark"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Kill(ctxFor(t)); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Wait(); err != nil {
				t.Fatal(err)
			}
			waitGone(t, e, "yes stream-unread-mark")
		}},
	}
}

func failureCases() []Case {
	return []Case{
		{Name: "unavailable/container-killed", Fresh: true, Run: func(t *testing.T, e *Env) {
			killContainer(t, e)
			res, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"true"}})
			wantErr(t, err, errdefs.ErrUnavailable, "exited")
			if len(res.Stdout)+len(res.Stderr) != 0 {
				t.Fatalf("diagnostics disguised as output: %q %q", res.Stdout, res.Stderr)
			}
			p := e.Dir + "/f.txt"
			_, err = e.SB.ReadFile(ctxFor(t), p, 0)
			wantErr(t, err, errdefs.ErrUnavailable, p)
			err = e.SB.WriteFile(ctxFor(t), p, []byte("x"))
			wantErr(t, err, errdefs.ErrUnavailable, p)
			_, err = e.SB.ExecStream(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"true"}})
			wantErr(t, err, errdefs.ErrUnavailable, "exited")
		}},
		{Name: "unavailable/killed-during-exec", Fresh: true, Run: func(t *testing.T, e *Env) {
			done := make(chan error, 1)
			go func() {
				_, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"sleep", "3171"}})
				done <- err
			}()
			p, err := e.SB.ExecStream(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"sleep", "3172"}, Timeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			waitRunning(t, e, "sleep 3171")
			waitRunning(t, e, "sleep 3172")
			killContainer(t, e)
			select {
			case err := <-done:
				wantErr(t, err, errdefs.ErrUnavailable, "exited")
				if !strings.Contains(err.Error(), "137") {
					t.Fatalf("diagnostics lack the exit code: %v", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("exec still waiting a minute after its container died")
			}
			for range p.Events() {
			}
			_, err = p.Wait()
			wantErr(t, err, errdefs.ErrUnavailable, "exited")
		}},
	}
}

// killContainer kills the sandbox's container and waits until the engine sees it stopped.
func killContainer(t *testing.T, e *Env) {
	t.Helper()
	if e.kill != nil {
		e.kill(t, e.SB)
		return
	}
	c := testutil.Docker(t)
	if err := c.ContainerKill(t.Context(), e.SB.ContainerID(), "KILL"); err != nil {
		t.Fatalf("kill container: %v", err)
	}
	if err := testutil.WaitStopped(t.Context(), c, e.SB.ContainerID(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if info, err := c.ContainerInspect(t.Context(), e.SB.ContainerID()); err == nil && info.State.Status != container.StateExited {
		t.Fatalf("container is %s after kill", info.State.Status)
	}
}
