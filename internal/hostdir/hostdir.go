// Package hostdir keeps the host directories composebox makes for a sample inert on the host:
// a directory a container binds is mounted on itself nosuid and nodev, so that a setuid binary
// or a device node an agent leaves there (as root in its container, which is root on the host)
// gives nobody on the host its owner's rights or the device.
package hostdir

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/composebox/composebox/internal/errdefs"
)

// ErrUnavailable marks a host where a directory cannot be made inert: composebox is not
// root, so it cannot mount. It is an ErrPrerequisite.
var ErrUnavailable = errdefs.New(errdefs.ErrPrerequisite, "cannot mount a sample's directory nosuid,nodev")

// Inert reports whether dir lies on a mount that is nosuid and nodev.
func Inert(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, err
	}
	return st.Flags&unix.ST_NOSUID != 0 && st.Flags&unix.ST_NODEV != 0, nil
}

// keptFlags are the flags of the mount dir sits on that the remount keeps: without them a
// remount would make exec, writes or atime updates possible where they were not.
var keptFlags = []struct{ st, ms uintptr }{
	{unix.ST_RDONLY, unix.MS_RDONLY},
	{unix.ST_NOEXEC, unix.MS_NOEXEC},
	{unix.ST_SYNCHRONOUS, unix.MS_SYNCHRONOUS},
	{unix.ST_NOATIME, unix.MS_NOATIME},
	{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
	{unix.ST_RELATIME, unix.MS_RELATIME},
}

// MakeInert mounts dir on itself, nosuid and nodev, unless it already lies on such a mount (a
// state directory on a nosuid,nodev filesystem needs no mount). Release undoes it. A host where
// composebox cannot mount is ErrUnavailable, saying how to fix it.
func MakeInert(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("make %s nosuid,nodev: %w", dir, err)
	}
	if st.Flags&unix.ST_NOSUID != 0 && st.Flags&unix.ST_NODEV != 0 {
		return nil
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	for _, k := range keptFlags {
		if uintptr(st.Flags)&k.st != 0 {
			flags |= k.ms
		}
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return mountError(dir, err)
	}
	if err := unix.Mount("", dir, "", flags, ""); err != nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		return mountError(dir, err)
	}
	return nil
}

func mountError(dir string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return errdefs.Wrap(ErrUnavailable, err, fmt.Sprintf(
			"make %s nosuid,nodev (so that what a sample leaves there is inert on the host): run composebox as root, "+
				"or keep its state directory (--state-dir, COMPOSEBOX_STATE_DIR) on a filesystem mounted nosuid,nodev", dir))
	}
	return fmt.Errorf("make %s nosuid,nodev: %w", dir, err)
}

// Release unmounts what MakeInert mounted on dir; a directory that is no mount point, or is
// gone, is nothing to do. The unmount is lazy: a process still inside lets go later.
func Release(dir string) error {
	for range 8 {
		if !mountRoot(dir) {
			return nil
		}
		err := unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		switch {
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
			return nil
		case err != nil:
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
		// Again, in case mounts were stacked there.
	}
	return fmt.Errorf("unmount %s: still a mount point after 8 unmounts", dir)
}

// mountRoot reports whether dir is the root of a mount. Where the kernel cannot say (before
// Linux 5.8), it answers yes, and the unmount finds out.
func mountRoot(dir string) bool {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE, &stx); err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return true
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}
