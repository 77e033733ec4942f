#!/usr/bin/env bash
# make test's runner. The suites wait far more than they compute (containers starting,
# healthchecks, pods), so they run as concurrent tracks rather than one after another:
#   go:      the Go packages on the local engine (race, the in-memory backend, then the rest);
#   python:  the Python client's suites, then the real inspect_ai, on the local engine;
#   cluster: the local Kubernetes cluster's start (its first build compiles for minutes, once
#            per machine), then the Go tests that need it beside the Python and inspect_ai
#            suites on it.
# Each track writes its own log, printed whole when the track ends (so that a failure reads as
# one block), and the run fails when any track fails. What runs is set by the Makefile's
# variables, passed in the environment: GO, TEST_FLAGS, RACE_EARLY, PLAIN_EARLY,
# FAKE_PKGS, FAKE_TESTS, K8S_ON, K8S_LOG, K8S_PKGS, K8S_CLI_TESTS, MODULE.
# TRACKS (default "go python cluster") runs fewer of them.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=bin/test-logs
mkdir -p "$logs"
TRACKS=${TRACKS:-go python cluster}
MAKE=${MAKE:-make}

# plain runs go test as make build compiles the binary (static, -trimpath), so that the test
# builds reuse its compiled packages instead of compiling the compose library and the
# Kubernetes client a second time (minutes on 2 cores). -race needs cgo, so it cannot.
plain() {
  CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" $GO test "$@"
}

# run NAME FUNCTION: runs one track with its output in its log, and prints the log at the end.
run() {
  local name=$1 start=$SECONDS rc=0
  "$2" >"$logs/$name.log" 2>&1 || rc=$?
  {
    echo "=== test: track $name $([ $rc = 0 ] && echo passed || echo FAILED) in $((SECONDS - start)) s"
    cat "$logs/$name.log"
    echo "=== test: end of track $name"
  } >"$logs/$name.out"
  # One track prints at a time, so that two ending together do not interleave.
  flock "$logs/.print" cat "$logs/$name.out"
  return $rc
}

# shellcheck disable=SC2086 # the package lists and flags are word lists
go_track() {
  local status=0
  $GO test -race $TEST_FLAGS $RACE_EARLY || status=1
  $GO test -race $TEST_FLAGS -run "$FAKE_TESTS" $FAKE_PKGS || status=1
  if [ -n "$K8S_ON" ]; then
    plain $TEST_FLAGS -skip "$K8S_CLI_TESTS" $PLAIN_EARLY || status=1
  else
    # Without the cluster its packages run here, and skip, saying so.
    plain $TEST_FLAGS $PLAIN_EARLY $K8S_PKGS || status=1
  fi
  return $status
}

python_track() {
  local status=0
  $MAKE --no-print-directory test-python || status=1
  $MAKE --no-print-directory test-inspect || status=1
  return $status
}

# shellcheck disable=SC2086
cluster_track() {
  local status=0
  mkdir -p "$(dirname "$K8S_LOG")"
  if ! scripts/k8s/up.sh >"$K8S_LOG" 2>&1; then
    cat "$K8S_LOG"
    echo "test: the local Kubernetes cluster did not come up" >&2
    return 1
  fi
  tail -n 1 "$K8S_LOG"
  # A Kubernetes test that finds no cluster now fails rather than skips.
  export COMPOSEBOX_K8S_REQUIRED=1
  # The Python and inspect_ai suites on the cluster run beside its Go tests (their log
  # follows the Go tests' in this track's).
  local py=$logs/cluster-python.log pid
  (
    rc=0
    $MAKE --no-print-directory test-python-k8s || rc=1
    $MAKE --no-print-directory test-inspect-k8s || rc=1
    exit $rc
  ) >"$py" 2>&1 &
  pid=$!
  $GO test -race $TEST_FLAGS "$MODULE/internal/k8stest" || status=1
  plain $TEST_FLAGS "$MODULE/kubernetes" || status=1
  plain $TEST_FLAGS -run "$K8S_CLI_TESTS" ./cmd/composebox/ || status=1
  wait "$pid" || status=1
  cat "$py"
  return $status
}

start=$SECONDS
pids=()
names=()
for t in $TRACKS; do
  case $t in
  go) run go go_track & ;;
  python) run python python_track & ;;
  cluster)
    [ -n "$K8S_ON" ] || continue
    echo "test: the local Kubernetes cluster comes up in the background (log: $K8S_LOG)"
    run cluster cluster_track &
    ;;
  *) echo "test: unknown track $t (go, python, cluster)" >&2; exit 2 ;;
  esac
  pids+=($!)
  names+=("$t")
done
status=0
failed=()
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    status=1
    failed+=("${names[$i]}")
  fi
done
echo "test: tracks done in $((SECONDS - start)) s${failed[*]:+; FAILED: ${failed[*]}}"
exit $status
