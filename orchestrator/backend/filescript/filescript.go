// Package filescript holds the shell scripts that file and directory operations run in a
// container, and the exit codes they report failures with, so that every backend that moves
// files over a plain exec (Docker's sandboxio, the Kubernetes backend) fails the same way.
package filescript

// ReadFile runs as the target's user, so the kernel applies that user's permissions; the
// checks before cat only turn the common failures into exit codes, since shell and cat error
// messages differ between images. test(1) follows symlinks, as cat does. Only a regular file
// is read: anything else (a FIFO, a device, a socket) is refused before it is opened.
const ReadFile = `f=$1
if [ ! -e "$f" ]; then
	a=$f
	while :; do
		a=${a%/*}; [ -n "$a" ] || a=/
		if [ -e "$a" ]; then
			[ -d "$a" ] || exit 43
			[ -x "$a" ] || exit 42
			exit 40
		fi
	done
fi
[ -d "$f" ] && exit 41
if [ ! -f "$f" ]; then
	if [ -p "$f" ]; then echo "a FIFO"
	elif [ -c "$f" ]; then echo "a character device"
	elif [ -b "$f" ]; then echo "a block device"
	elif [ -S "$f" ]; then echo "a socket"
	fi >&2
	exit 44
fi
[ -r "$f" ] || exit 42
exec cat -- "$f"
`

// WriteFile creates the missing parents and overwrites the file in place (keeping an
// existing file's mode and inode, and writing through a symlink), as the target's user, so
// the new file and directories belong to that user.
const WriteFile = `f=$1
[ -d "$f" ] && exit 41
d=${f%/*}; [ -n "$d" ] || d=/
if [ ! -d "$d" ] && ! mkdir -p -- "$d" 2>/dev/null; then
	a=$d
	while [ ! -e "$a" ]; do a=${a%/*}; [ -n "$a" ] || a=/; done
	[ -d "$a" ] || exit 43
	{ [ -w "$a" ] && [ -x "$a" ]; } || exit 42
	exec mkdir -p -- "$d"
fi
if [ -e "$f" ]; then
	[ -w "$f" ] || exit 42
elif [ ! -w "$d" ] || [ ! -x "$d" ]; then
	exit 42
fi
exec cat >"$f"
`

// Directories travel as tar streams made and unpacked by tar inside the container, as the
// target's user, so that user's permissions apply as they do to files. Symlinks travel as
// symlinks; nothing is followed.
const (
	ReadDir = `d=$1
[ -e "$d" ] || exit 40
[ -d "$d" ] || exit 43
{ [ -r "$d" ] && [ -x "$d" ]; } || exit 42
exec tar -c -f - -C "$d" .
`
	WriteDir = `d=$1
if [ -e "$d" ] && [ ! -d "$d" ]; then exit 43; fi
mkdir -p -- "$d" 2>/dev/null || exit 42
{ [ -w "$d" ] && [ -x "$d" ]; } || exit 42
exec tar -x -f - -C "$d"
`
)

// Exit codes of the file scripts. They sit well away from what sh, cat and mkdir return for
// their own failures (1, 2, 126, 127 and signals), which end up as plain errors.
const (
	CodeNotFound   = 40
	CodeIsDir      = 41
	CodePermission = 42
	CodeNotDir     = 43 // a component of the path is not a directory
	CodeNotRegular = 44 // a FIFO, a device or a socket: its type is on stderr
)
