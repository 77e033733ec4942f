#!/usr/bin/env bash
# Builds, once, the Debian trixie root the real inspect_ai runs in for the tests: Python 3.13
# with trixie's packages of inspect_ai's dependencies (pydantic 2, anyio 4, textual...), pytest,
# and inspect_ai itself installed from its source in INSPECT_SRC. Debian 12, this machine's
# system, has pydantic 1 only, and PyPI is unreachable, hence a root of the next release.
#
# The root is cached outside the checkout, in INSPECT_ROOT_CACHE (default
# /var/cache/composebox-trixie), as the cluster's binaries are, under a name that hashes its
# package list, FORMAT and inspect_ai's source: a change of any builds a new root beside the old ones,
# which stay (another checkout's run may use one; remove them by hand). Runs never write into a
# root (run.sh puts an overlay over it). Prints the root's path on stdout.
#
# Usage: scripts/inspect/root.sh INSPECT_SRC    (needs root, Debian, and the Debian mirror)
set -euo pipefail
# apt-get that waits for the other tracks' apt-get (scripts/apt-get.sh).
apt_get=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../apt-get.sh
here=$(cd "$(dirname "$0")" && pwd)
LOG_PREFIX=inspect-root
. "$here/common.sh"

src=${1:?usage: root.sh INSPECT_SRC}
[ -d "$src/src/inspect_ai" ] || die "$src holds no inspect_ai source (src/inspect_ai)"
[ "$(id -u)" = 0 ] || die "building the trixie root needs root (debootstrap, chroot)"

# Trixie's packages of what inspect_ai imports on the paths an eval and its sandboxes take, and
# of what the tests run with. Not packaged there: mmh3, nest_asyncio2, acp
# (agent-client-protocol), aiobotocore and s3fs, which clients/python/tests-inspect/standins
# stands in for; jsonref and universal-pathlib, which only paths the tests never take import.
PACKAGES=(
  python3 python3-venv python3-pip python3-setuptools python3-setuptools-scm python3-wheel
  python3-pydantic python3-httpx python3-anyio python3-sniffio python3-textual python3-rich
  python3-click python3-numpy python3-tiktoken python3-fastapi python3-uvicorn python3-boto3
  python3-jsonschema python3-psutil python3-tenacity python3-platformdirs
  python3-docstring-parser python3-shortuuid python3-ijson python3-jsonlines python3-jsonpatch
  python3-jsonpath-ng python3-semver python3-zstandard python3-bs4
  python3-dotenv python3-yaml python3-debugpy python3-fsspec
  python3-typing-extensions python3-zipp python3-pytest python3-pytest-asyncio
  ca-certificates
)
MIRROR=${INSPECT_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

# What a root is made of, for the cache key beside the package list and inspect_ai's source:
# raise it when the steps below change what they make.
FORMAT=1
key=$( { echo "format $FORMAT"; printf '%s\n' "${PACKAGES[@]}";
  (cd "$src" && find pyproject.toml src -type f -print0 | sort -z | xargs -0 sha256sum); } | sha256sum | cut -c1-16)
root=$CACHE/root-$key
mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
flock 9
if [ -f "$root/.complete" ]; then
  echo "$root"
  exit 0
fi

need=()
for p in debootstrap; do
  command -v "$p" >/dev/null || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || die "install ${need[*]} first"
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "$apt_get" install -y -qq "${need[@]}" >/dev/null 2>&1 ||
    { "$apt_get" update -qq && "$apt_get" install -y -qq "${need[@]}" >/dev/null; }
fi

t0=$SECONDS
tmp=$CACHE/.building-$key
umount_all "$tmp"
rm -rf "$tmp"
log "debootstrap trixie into $tmp (about 2 minutes)"
debootstrap --variant=minbase trixie "$tmp" "$MIRROR" >"$CACHE/.debootstrap.log" 2>&1 ||
  { tail -n 30 "$CACHE/.debootstrap.log" >&2; die "debootstrap trixie failed (log: $CACHE/.debootstrap.log)"; }
log "debootstrap: $((SECONDS - t0)) s; apt-get install of ${#PACKAGES[@]} packages (about 2 minutes)"
mount_basics "$tmp"
trap 'umount_all "$tmp"' EXIT
in_root() { chroot "$tmp" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root \
  DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
in_root apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >"$CACHE/.apt.log" 2>&1 ||
  { tail -n 30 "$CACHE/.apt.log" >&2; die "apt-get install in the trixie root failed (log: $CACHE/.apt.log)"; }
in_root apt-get clean

# inspect_ai from its source: its declared minimums are newer than trixie's (pydantic 2.13,
# anyio 4.14, textual 6.2...), which it runs on for sandboxes and evals, hence --no-deps. The
# source is copied in: pip builds in place and must not write into it.
log "installing inspect_ai from $src"
mkdir -p "$tmp/opt/inspect_ai-src"
cp -a "$src/." "$tmp/opt/inspect_ai-src/"
version=$(sed -n 's/^# inspect_ai \([0-9][0-9.]*\).*/\1/p' "$src/SOURCE.md" 2>/dev/null | head -n1)
in_root env SETUPTOOLS_SCM_PRETEND_VERSION="${version:-0.0.0}" python3 -m pip install --quiet \
  --no-deps --no-build-isolation --no-index --break-system-packages --root-user-action=ignore \
  /opt/inspect_ai-src >"$CACHE/.pip.log" 2>&1 ||
  { tail -n 30 "$CACHE/.pip.log" >&2; die "pip install of inspect_ai failed (log: $CACHE/.pip.log)"; }
rm -rf "$tmp/opt/inspect_ai-src"
# (Not `import inspect_ai`: it needs the stand-ins that run.sh puts on the path.)
in_root python3 -c 'import sys, importlib.metadata as md, pydantic; print("inspect-root: python", sys.version.split()[0], "pydantic", pydantic.VERSION, "inspect_ai", md.version("inspect_ai"))' >&2
umount_all "$tmp"
trap - EXIT

touch "$tmp/.complete"
mv "$tmp" "$root"
log "built $root in $((SECONDS - t0)) s"
echo "$root"
