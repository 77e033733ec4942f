#!/usr/bin/env bash
# `make bench`: composebox against the compose CLI, side by side in one run (issue 8):
# throughput, capacity, latency and peak RSS; and against the bare Engine API floor. See
# bench/scale/main.go for what each phase does.
#
# Usage: bench/run.sh [flags of bench/scale]
#   e.g. bench/run.sh -n 10 -capacity 40 -init-rounds 5 -exec-rounds 20   (a smoke run)
#        bench/run.sh -phases floor                                        (`make bench-floor`)
#
# With -phases floor alone no compose CLI is built, and only the floor section of the results
# file is replaced.
# It builds the compose v2 CLI once (bench/build-compose.sh; falls back to Debian's
# docker-compose v1 when that fails), builds bench/scale, and runs it. A run at the issue's
# sizes (no size flags) writes bench/RESULTS.md; any other run writes its Markdown to
# $OUT (default: ${TMPDIR:-/tmp}/composebox-bench-results.md). Everything the run creates
# carries dev.composebox.managed=true and a cbxbench task label and is removed at the end, on
# Ctrl-C and on SIGTERM (`bin/cbxbench cleanup` removes it by label after a SIGKILL).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

# A run at the issue's sizes is every phase, or the floor phase alone, with no size flag.
full=1
floor_only=0
prev=
for a in "$@"; do
	case $a in
	-n | -n=* | -concurrency* | -capacity* | -init-rounds* | -exec-rounds* | -phases* | -project* | -compose* | -floor-* | --*) full=0 ;;
	esac
	if [ "$a" = "-phases=floor" ] || { [ "$prev" = "-phases" ] && [ "$a" = "floor" ]; }; then floor_only=1; fi
	prev=$a
done
if [ "$floor_only" = 1 ]; then
	full=1
	for a in "$@"; do
		case $a in -n | -n=* | -concurrency* | -capacity* | -init-rounds* | -exec-rounds* | -project* | -compose* | -floor-* | --*) full=0 ;; esac
	done
fi
if [ -z "${OUT:-}" ]; then
	if [ "$full" = 1 ]; then OUT=bench/RESULTS.md; else OUT=${TMPDIR:-/tmp}/composebox-bench-results.md; fi
fi

if [ "$floor_only" = 1 ]; then
	compose=none # the floor phase has no CLI baseline
elif compose=$(echo "== building the baseline (compose v2 CLI v2.40.3, cached in bin/)" >&2; bench/build-compose.sh 2>/tmp/cbxbench-build-compose.log); then
	:
else
	echo "bench: building compose v2 failed (log: /tmp/cbxbench-build-compose.log); falling back to docker-compose v1" >&2
	compose=$(command -v docker-compose || true)
	[ -n "$compose" ] || { echo "bench: no compose CLI for the baseline (apt-get install docker-compose)" >&2; exit 1; }
fi

echo "== building bench/scale" >&2
go build -o bin/cbxbench ./bench/scale

machine=$(mktemp)
pid=
cleanup() {
	trap - INT TERM
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	bin/cbxbench cleanup || true
	rm -f "$machine"
}
on_signal() {
	echo "bench: interrupted, cleaning up" >&2
	cleanup
	trap - EXIT
	exit 130
}
trap cleanup EXIT
trap on_signal INT TERM

{
	echo "date:            $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "cpus (nproc):    $(nproc)"
	echo "memory:          $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "kernel:          $(uname -sr)"
	echo "os:              $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
	echo "docker engine:   $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})' 2>/dev/null)"
	echo "storage driver:  $(docker info --format '{{.Driver}}' 2>/dev/null)"
	echo "cgroup:          $(docker info --format '{{.CgroupDriver}}, v{{.CgroupVersion}}' 2>/dev/null)"
	echo "go:              $(go version | awk '{print $3}')"
	[ "$floor_only" = 1 ] || echo "baseline:        $("$compose" version 2>/dev/null | head -1) ($compose)"
	echo "docker cli:      $(docker version --format '{{.Client.Version}}' 2>/dev/null)"
} >"$machine"

# In the background, so that a SIGTERM to this script runs the trap at once (bash defers traps
# while a foreground command runs).
bin/cbxbench -compose "$compose" -machine "$machine" -out "$OUT" "$@" &
pid=$!
status=0
wait "$pid" || status=$?
pid=
exit "$status"
