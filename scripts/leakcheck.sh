#!/usr/bin/env bash
# Fails when composebox resources (label dev.composebox.managed) exist now that did not exist at
# the snapshot: what a test run leaves behind is a leak. Samples a user left running on purpose
# before the run are in the snapshot and so are not reported.
set -euo pipefail
state=${LEAKCHECK_STATE:-/tmp/composebox-leakcheck.$(id -u)}
# The local Kubernetes cluster's namespaces too, while it runs (bin/k8s/env).
here=$(cd "$(dirname "$0")" && pwd)
k8s_env=$here/../bin/k8s/env
list() {
  { docker ps -aq --no-trunc --filter label=dev.composebox.managed | sed 's/^/container /'
    docker network ls -q --no-trunc --filter label=dev.composebox.managed | sed 's/^/network /'
    docker volume ls -q --filter label=dev.composebox.managed | sed 's/^/volume /'
    if [ -f "$k8s_env" ]; then
      (. "$here/k8s/common.sh" && api '/api/v1/namespaces?labelSelector=dev.composebox.managed' |
        names) | sed 's/^/namespace /'
    fi
  } | sort
}
case ${1:-check} in
snapshot) list >"$state" ;;
check)
  [ -f "$state" ] || : >"$state"
  leaked=$(comm -13 "$state" <(list))
  if [ -n "$leaked" ]; then
    echo "leakcheck: the tests left composebox resources behind:" >&2
    while read -r kind id; do
      case $kind in
      container) docker ps -a --no-trunc --filter "id=$id" --format '  container {{.Names}} ({{.Status}}) {{.Labels}}' >&2 ;;
      *) echo "  $kind $id" >&2 ;;
      esac
    done <<<"$leaked"
    exit 1
  fi
  echo "leakcheck: no composebox container, network, volume or namespace left behind"
  ;;
*) echo "usage: $0 snapshot|check" >&2; exit 2 ;;
esac
