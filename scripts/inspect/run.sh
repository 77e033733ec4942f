#!/usr/bin/env bash
# Runs the real inspect_ai against the composebox provider: the tests in
# clients/python/tests-inspect, with Python 3.13 in the cached Debian trixie root (root.sh),
# inspect_ai installed there from INSPECT_SRC, and the composebox client installed into a venv
# of the run from the wheel that clients/python builds, so that inspect_ai finds the provider
# through the wheel's entry point, as on a user's machine.
#
# Each run mounts an overlay over the cached root (which it never writes), with the host's
# /tmp, /run (the engine's socket), the checkout, the cluster's state (when it runs), the
# static busybox composebox builds its base image from, and the docker CLI (for the tests'
# leftover checks) at the same paths, then runs pytest in a chroot.
# The servers the tests spawn are the checkout's bin/composebox, run in the chroot against the
# host's engine (or cluster).
#
# Where INSPECT_SRC is absent (a user's clone), it prints a NOTICE and exits 0.
#
# Usage: scripts/inspect/run.sh [pytest args...]
#        scripts/inspect/run.sh --script FILE [args...]   (a program instead, e.g. the benchmark)
# Environment: INSPECT_SRC (default ../shared/inspect_ai beside the checkout), COMPOSEBOX_BIN
# (default bin/composebox), PYTHON (the host's, to build the wheel), and whatever the tests
# read (COMPOSEBOX_TEST_BACKEND, COMPOSEBOX_TEST_ENGINES, COMPOSEBOX_K8S_REQUIRED...).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root_dir=$(cd "$here/../.." && pwd)
LOG_PREFIX=test-inspect
. "$here/common.sh"

src=${INSPECT_SRC:-$(realpath -m "$root_dir/../shared/inspect_ai")}
if [ ! -d "$src/src/inspect_ai" ]; then
  log "NOTICE: skipped the tests on the real inspect_ai: no inspect_ai source at $src (set INSPECT_SRC)"
  exit 0
fi
bin=${COMPOSEBOX_BIN:-$root_dir/bin/composebox}
[ -x "$bin" ] || die "no composebox binary at $bin: run make build"
python=${PYTHON:-/usr/bin/python3}

t0=$SECONDS
root=$("$here/root.sh" "$src")
t_root=$((SECONDS - t0))

run=$(mktemp -d /tmp/cbx-inspect.XXXXXX)
merged=$run/root
cleanup() {
  umount_all "$merged"
  rm -rf "$run"
}
trap cleanup EXIT
mkdir -p "$run/upper" "$run/work" "$merged" "$run/dist" "$run/home"

# The wheel, built the way users build it.
(cd "$root_dir/clients/python" && "$python" -m build --wheel --no-isolation --outdir "$run/dist" . \
  >"$run/build.log" 2>&1) || { cat "$run/build.log" >&2; die "building the wheel failed"; }
wheel=$(ls "$run"/dist/composebox-*.whl)

mount -t overlay overlay -o "lowerdir=$root,upperdir=$run/upper,workdir=$run/work" "$merged"
mount --make-private "$merged"
mount_basics "$merged"
bind() { # bind SRC [ro]: SRC at the same path in the chroot
  local s=$1 t=$merged$1
  [ -e "$s" ] || return 0
  if [ -d "$s" ]; then mkdir -p "$t"; else mkdir -p "$(dirname "$t")"; touch "$t"; fi
  mount --bind "$s" "$t"
  mount --make-private "$t"
  [ "${2:-}" != ro ] || mount -o remount,bind,ro "$t"
}
bind /tmp
bind /run
bind "$root_dir"
bind "$src" ro
bind /var/lib/composebox-k8s ro
bind "$(command -v docker)" ro
# composebox builds its base image from the host's static busybox.
bind "$(realpath /bin/busybox)" ro
bind "$(realpath "$bin")" ro

in_root() {
  chroot "$merged" /usr/bin/env -i PATH="$run/venv/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
    HOME="$run/home" LANG=C.UTF-8 TMPDIR=/tmp PYTHONDONTWRITEBYTECODE=1 "$@"
}
in_root python3 -m venv --system-site-packages "$run/venv"
in_root "$run/venv/bin/pip" install --quiet --no-deps --no-index "$wheel" >"$run/pip.log" 2>&1 ||
  { cat "$run/pip.log" >&2; die "installing $wheel failed"; }
# inspect's console script, for the venv's interpreter (inspect_ai is the root's, whose own
# script runs the root's python, which sees neither the wheel nor the stand-ins).
printf '#!%s\nimport sys\nfrom inspect_ai._cli.main import main\nsys.exit(main())\n' "$run/venv/bin/python" \
  >"$run/venv/bin/inspect"
chmod +x "$run/venv/bin/inspect"
# The stand-ins for what trixie lacks come after every installed package on sys.path.
echo "$root_dir/clients/python/tests-inspect/standins" \
  >"$(in_root "$run/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/composebox-test-standins.pth"
log "trixie root ready in ${t_root} s ($root); $(in_root python3 -c 'import sys, inspect_ai, pydantic; print("python", sys.version.split()[0], "inspect_ai", inspect_ai.__version__, "pydantic", pydantic.VERSION)')"

# The exec_remote tests' images (musl, glibc), made FROM scratch with this machine's files.
"$here/images.sh" "$run/images"

# What the tests read, passed through; the rest of the host's environment stays out.
pass=(COMPOSEBOX_BIN="$(realpath "$bin")" INSPECT_SRC="$src" COMPOSEBOX_REPO="$root_dir"
  INSPECT_TEST_IMAGES="$run/images")
for v in COMPOSEBOX_TEST_BACKEND COMPOSEBOX_TEST_ENGINES COMPOSEBOX_K8S_REQUIRED KUBECONFIG \
  COMPOSEBOX_REGISTRY INSPECT_TESTS_QUICK; do
  [ -z "${!v:-}" ] || pass+=("$v=${!v}")
done
status=0
if [ "${1:-}" = --script ]; then
  # A program instead of the tests (the benchmark), in the same environment, from the checkout.
  shift
  in_root /usr/bin/env -C "$root_dir" "${pass[@]}" "$run/venv/bin/python" "$@" || status=$?
else
  in_root /usr/bin/env -C "$root_dir/clients/python/tests-inspect" "${pass[@]}" "$run/venv/bin/python" -m pytest -q -p no:cacheprovider \
    --rootdir "$root_dir/clients/python/tests-inspect" "$root_dir/clients/python/tests-inspect" "$@" ||
    status=$?
fi
log "done in $((SECONDS - t0)) s (the root: ${t_root} s)"
exit $status
