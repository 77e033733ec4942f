# Sourced by root.sh and run.sh: where the trixie root is cached, and its mounts.
CACHE=${INSPECT_ROOT_CACHE:-/var/cache/composebox-trixie}

log() { printf '%s: %s\n' "${LOG_PREFIX:-inspect}" "$*" >&2; }
die() { log "$*"; exit 1; }

# mount_basics DIR: what a chroot into DIR needs of the kernel's file systems.
mount_basics() {
  local d=$1
  mkdir -p "$d/proc" "$d/sys" "$d/dev"
  mount -t proc proc "$d/proc"
  mount --rbind /sys "$d/sys"
  mount --make-rslave "$d/sys"
  mount --rbind /dev "$d/dev"
  mount --make-rslave "$d/dev"
}

# umount_all DIR: every mount at or under DIR, deepest first.
umount_all() {
  local d
  d=$(realpath -m "$1")
  awk -v d="$d" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
