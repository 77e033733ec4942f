package imagespec

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/composebox/composebox/cleanup/labels"
)

// DefaultBusybox is where Debian's busybox-static puts its binary.
const DefaultBusybox = "/bin/busybox"

// BaseRepository is the base image's repository; its tag is a content hash.
const BaseRepository = "composebox/base"

// Users of the base image.
const (
	RootUser    = "root"
	SandboxUser = "sandbox" // uid and gid 1000
	SandboxUID  = 1000
	BaseWorkdir = "/workspace"
)

const baseDockerfile = `FROM scratch
COPY rootfs/ /
COPY --chown=1000:1000 home/ /home/
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /workspace
CMD ["/bin/sh"]
`

const passwd = `root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
`

const group = `root:x:0:
sandbox:x:1000:
nogroup:x:65534:
`

// adduser is the base image's adduser: Debian's busybox has no applet of that name, and
// harnesses add users to a sample (inspect_ai's sandbox self-check does). It takes Debian's
// options (--comment/--gecos, --disabled-password, --home, --shell, --uid, --system...) and
// BusyBox's (-D, -h, -s, -u, -g, -S, -H), gives the user a group of its own name, and numbers
// both from 1001 up (system users from 100 up).
const adduser = `#!/bin/sh
set -e
usage() {
	echo "usage: adduser [--comment TEXT] [--disabled-password] [--home DIR] [--shell SHELL]"
	echo "               [--uid UID] [--system] [--no-create-home] USER"
	echo "       adduser [-D] [-h DIR] [-s SHELL] [-u UID] [-g GECOS] [-S] [-H] USER"
}
home= shell=/bin/sh uid= gecos= system= create=1 name=
while [ $# -gt 0 ]; do
	case "$1" in
	--help|-help) usage; exit 0 ;;
	--comment|--gecos|-g) gecos=$2; shift ;;
	--home|-h) home=$2; shift ;;
	--shell|-s) shell=$2; shift ;;
	--uid|-u) uid=$2; shift ;;
	--system|-S) system=1 ;;
	--no-create-home|-H) create= ;;
	--disabled-password|--disabled-login|--quiet|-q|-D) ;;
	-*) echo "adduser: unknown option $1" >&2; usage >&2; exit 1 ;;
	*) [ -z "$name" ] || { usage >&2; exit 1; }; name=$1 ;;
	esac
	shift
done
[ -n "$name" ] || { usage >&2; exit 1; }
case "$name" in *[!a-zA-Z0-9._-]*|-*) echo "adduser: invalid user name '$name'" >&2; exit 1 ;; esac
case "$gecos$home$shell$uid" in *:*|*"
"*) echo "adduser: a field holds ':' or a newline" >&2; exit 1 ;; esac
if grep -q "^$name:" /etc/passwd; then echo "adduser: the user '$name' already exists" >&2; exit 1; fi
first=1001 last=59999
[ -z "$system" ] || { first=100 last=999; }
next() { awk -F: -v a="$first" -v b="$last" '$3 >= a && $3 <= b && $3 >= n { n = $3 + 1 } END { print (n ? n : a) }' n="$first" "$@"; }
[ -n "$uid" ] || uid=$(next /etc/passwd /etc/group)
gid=$uid
[ -n "$home" ] || home=/home/$name
echo "$name:x:$gid:" >>/etc/group
echo "$name:x:$uid:$gid:$gecos:$home:$shell" >>/etc/passwd
if [ -n "$create" ] && [ ! -e "$home" ]; then
	mkdir -p "$home"
	chown "$uid:$gid" "$home"
fi
`

var (
	baseMu    sync.Mutex
	baseSpecs = map[string]Spec{}
)

// BaseSpec is the base image built from the static busybox at path: its applets linked under
// /bin (with /sbin, /usr/bin and /usr/sbin pointing there), an adduser script, /tmp, /etc/passwd
// and /etc/group with root and the non-root user "sandbox" (1000:1000), and WORKDIR /workspace,
// writable by both.
func BaseSpec(path string) (Spec, error) {
	baseMu.Lock()
	defer baseMu.Unlock()
	if s, ok := baseSpecs[path]; ok {
		return s, nil
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("read busybox: %w (Debian: apt-get install busybox-static, or `make docker`)", err)
	}
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return Spec{}, fmt.Errorf("list busybox applets of %s: %w", path, err)
	}
	files := []File{
		{Name: "rootfs", Dir: true, Mode: 0o755},
		{Name: "rootfs/bin", Dir: true, Mode: 0o755},
		{Name: "rootfs/bin/busybox", Mode: 0o755, Body: bin},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		files = append(files, File{Name: "rootfs/bin/" + applet, Mode: 0o777, Link: "busybox"})
	}
	files = append(files,
		File{Name: "rootfs/sbin", Mode: 0o777, Link: "bin"},
		File{Name: "rootfs/usr", Dir: true, Mode: 0o755},
		File{Name: "rootfs/usr/bin", Mode: 0o777, Link: "../bin"},
		File{Name: "rootfs/usr/sbin", Mode: 0o777, Link: "../bin"},
		File{Name: "rootfs/bin/adduser", Mode: 0o755, Body: []byte(adduser)},
		File{Name: "rootfs/etc", Dir: true, Mode: 0o755},
		File{Name: "rootfs/etc/passwd", Mode: 0o644, Body: []byte(passwd)},
		File{Name: "rootfs/etc/group", Mode: 0o644, Body: []byte(group)},
		File{Name: "rootfs/tmp", Dir: true, Mode: 0o1777},
		File{Name: "rootfs/var", Dir: true, Mode: 0o755},
		File{Name: "rootfs/var/tmp", Dir: true, Mode: 0o1777},
		File{Name: "rootfs/root", Dir: true, Mode: 0o700},
		File{Name: "rootfs/workspace", Dir: true, Mode: 0o1777},
		File{Name: "home", Dir: true, Mode: 0o755},
		File{Name: "home/sandbox", Dir: true, Mode: 0o755},
	)
	s := Spec{
		Repository: BaseRepository,
		Dockerfile: baseDockerfile,
		Files:      files,
		Labels: map[string]string{
			labels.LabelManaged: "true",
			labels.LabelTask:    "",
			labels.LabelImage:   "base",
		},
	}
	baseSpecs[path] = s
	return s, nil
}

// BaseRef is the base image's reference for the busybox at path, without building it.
func BaseRef(path string) (string, error) {
	s, err := BaseSpec(path)
	if err != nil {
		return "", err
	}
	return s.Tag(), nil
}
