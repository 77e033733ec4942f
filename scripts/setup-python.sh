#!/usr/bin/env bash
# Makes the Python that runs the Python client's tests ready: httpx, pytest and pytest-asyncio
# for the tests, build, setuptools, wheel and pip for the test that builds the package and
# installs it into a fresh venv. On Debian as root it installs Debian's packages (PyPI may be
# unreachable); elsewhere it says what to install. A no-op when every module imports.
# Usage: scripts/setup-python.sh [python]   (default /usr/bin/python3)
set -euo pipefail
# apt-get that waits for the other tracks' apt-get (scripts/apt-get.sh).
apt_get=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/apt-get.sh

log() { printf 'setup-python: %s\n' "$*" >&2; }

python=${1:-/usr/bin/python3}
# module:Debian package, in the order they are checked.
needs=(httpx:python3-httpx pytest:python3-pytest pytest_asyncio:python3-pytest-asyncio
  build:python3-build setuptools:python3-setuptools wheel:python3-wheel pip:python3-pip
  venv:python3-venv ensurepip:python3-venv)

# The packages of the modules that do not import, one a line (all of them without a python).
missing() {
  {
    "$python" - "${needs[@]}" 2>/dev/null <<'EOF' || printf '%s\n' "${needs[@]#*:}"
import importlib, sys
for need in sys.argv[1:]:
    module, package = need.split(":")
    try:
        importlib.import_module(module)
    except Exception:
        print(package)
EOF
  } | sort -u
}

pkgs=$(missing)
if [ -z "$pkgs" ]; then
  exit 0
fi
# shellcheck disable=SC2086  # one package a word
set -- $pkgs

# Debian's packages serve Debian's own interpreter only: prefix /usr, not a venv (or no python3
# at all yet on a minimal machine: apt installs it with the rest).
prefix=$("$python" -c 'import sys; print(sys.prefix if sys.prefix == sys.base_prefix else "venv")' \
  2>/dev/null || true)
system_python=
[ "$prefix" = /usr ] && system_python=1
[ "$python" = /usr/bin/python3 ] && [ ! -e "$python" ] && system_python=1
if [ -z "$system_python" ] || [ ! -f /etc/debian_version ] || [ "$(id -u)" != 0 ] ||
  ! command -v apt-get >/dev/null; then
  log "$python lacks modules the Python tests need. Install by hand:"
  log "  Debian/Ubuntu: apt-get install $*"
  log "  elsewhere: $python -m pip install httpx pytest pytest-asyncio build setuptools wheel"
  exit 1
fi

log "installing $*"
export DEBIAN_FRONTEND=noninteractive
# A fresh machine's package lists may be missing or stale: update once, then retry.
"$apt_get" install -y -qq "$@" >/dev/null 2>&1 ||
  { "$apt_get" update -qq && "$apt_get" install -y -qq "$@" >/dev/null; }

pkgs=$(missing)
if [ -n "$pkgs" ]; then
  log "still missing after apt-get install: $(echo $pkgs)"
  exit 1
fi
