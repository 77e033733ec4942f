#!/usr/bin/env bash
# Writes the build contexts of the exec_remote tests' images into OUT: nothing can be pulled,
# so each is FROM scratch, with this machine's own files.
#   OUT/glibc  a Debian-like image: Debian's dash as /bin/sh, coreutils' cat, sleep and env, the
#              probe (clients/python/tests-inspect/images/probe.c) built with gcc, and the
#              glibc they load
#   OUT/musl   a musl image, as Alpine's are: the probe built with musl-gcc, and musl's loader
# (The busybox image is composebox's own base image.) Installs musl-tools with apt if missing.
# Usage: scripts/inspect/images.sh OUT
set -euo pipefail
# apt-get that waits for the other tracks' apt-get (scripts/apt-get.sh).
apt_get=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../apt-get.sh
here=$(cd "$(dirname "$0")" && pwd)
LOG_PREFIX=inspect-images
. "$here/common.sh"
out=${1:?usage: images.sh OUT}
probe=$here/../../clients/python/tests-inspect/images/probe.c

if ! command -v musl-gcc >/dev/null || ! command -v gcc >/dev/null; then
  command -v apt-get >/dev/null || die "install gcc and musl-tools (musl-gcc) first"
  log "installing gcc musl-tools"
  export DEBIAN_FRONTEND=noninteractive
  "$apt_get" install -y -qq gcc musl-tools >/dev/null 2>&1 ||
    { "$apt_get" update -qq && "$apt_get" install -y -qq gcc musl-tools >/dev/null; }
fi

# copy FILE DIR: FILE at the same path under DIR (following a symlink to its target's content).
copy() { mkdir -p "$2$(dirname "$1")"; cp -L "$1" "$2$1"; }

rootfs=$out/glibc/rootfs
mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc"
gcc -O2 -o "$rootfs/bin/probe" "$probe"
cp -L "$(command -v dash)" "$rootfs/bin/sh"
cp -L "$(command -v cat)" "$(command -v sleep)" "$(command -v env)" "$rootfs/bin/"
for f in "$rootfs"/bin/*; do
  ldd "$f" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }'
done | sort -u | while read -r lib; do copy "$lib" "$rootfs"; done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\n' >"$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"
printf 'FROM scratch\nCOPY rootfs/ /\nCMD ["/bin/sleep", "infinity"]\n' >"$out/glibc/Dockerfile"

rootfs=$out/musl/rootfs
mkdir -p "$rootfs/bin" "$rootfs/lib" "$rootfs/tmp"
musl-gcc -O2 -o "$rootfs/bin/probe" "$probe"
loader=$(readelf -l "$rootfs/bin/probe" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
[ -n "$loader" ] || die "musl-gcc made a static binary; the image wants musl's loader"
mkdir -p "$rootfs$(dirname "$loader")"
cp -L "$loader" "$rootfs$loader"
chmod 1777 "$rootfs/tmp"
printf 'FROM scratch\nCOPY rootfs/ /\nCMD ["/bin/probe", "sleep", "1000000"]\n' >"$out/musl/Dockerfile"
