#!/usr/bin/env bash
# Builds the Python package's distributions into OUTDIR, offline, with the system's build,
# setuptools and wheel (no isolation: no index is needed):
#   - the sdist and the pure wheel (py3-none-any): the client alone;
#   - for each BINARY given (a static composebox for Linux x86_64 or aarch64), a platform wheel
#     (py3-none-manylinux_2_17_<arch>) that carries it as composebox/_bin/composebox, with the
#     `composebox` console script. clients/python/setup.py reads the tag from the binary.
# Each build runs in a copy of clients/python, so the tree gets no build/, egg-info or _bin/.
# Usage: scripts/build-wheels.sh OUTDIR [BINARY...]    (PYTHON: default /usr/bin/python3)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-/usr/bin/python3}
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [BINARY...]" >&2; exit 2; }
out=$1
shift
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fresh_copy() {
	rm -rf "$work/src"
	cp -r "$root/clients/python" "$work/src"
	rm -rf "$work/src/build" "$work/src/dist" "$work/src"/*.egg-info "$work/src/composebox/_bin"
	find "$work/src" -name __pycache__ -prune -exec rm -rf {} +
}

build() {
	"$python" -m build --no-isolation --outdir "$out" "$@" "$work/src" >"$work/log" 2>&1 ||
		{ cat "$work/log" >&2; echo "build-wheels: python -m build $* failed" >&2; exit 1; }
}

fresh_copy
build
for bin in "$@"; do
	fresh_copy
	mkdir -p "$work/src/composebox/_bin"
	install -m 0755 "$bin" "$work/src/composebox/_bin/composebox"
	build --wheel
done
ls -1 "$out"
