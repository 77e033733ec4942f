#!/usr/bin/env bash
# Builds the local Kubernetes fixture's binaries from Go modules into K8S_CACHE, once per
# version: kube-apiserver, kube-controller-manager, kube-scheduler and kubelet with etcd; CoreDNS;
# kube-router; the distribution registry. What is already cached is left alone, so a warm run
# takes well under a second.
#
# A cold build is most of a cold CI run's time, so it compiles only what the cluster runs:
# - the control plane and etcd are one `go build` in one module, so the packages they share
#   (gRPC, protobuf, the etcd client, OpenTelemetry) are compiled once and the package graph is
#   loaded once;
# - no kubectl: the scripts speak to the API server with curl, and a person trying the cluster
#   uses their own kubectl with bin/k8s/env's KUBECONFIG;
# - CoreDNS with only the plugins the Corefile uses, and the registry with only its filesystem
#   storage, instead of their published mains, which link every cloud provider's SDK.
# The builds are niced, so that a machine's other work goes first, and use every core (set
# K8S_GOFLAGS=-p=1 to compile one package at a time on a crowded machine).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.sh"
export PATH=$PATH:/usr/local/go/bin

log() { printf 'k8s-build: %s\n' "$*" >&2; }

K8S_GOFLAGS=${K8S_GOFLAGS:-}
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} $K8S_GOFLAGS -trimpath"
gobuild() { nice -n 19 go build -ldflags "-s -w ${LDFLAGS_X:-}" "$@"; }

mkdir -p "$K8S_CACHE"
# One build at a time: a second `make k8s` waits for the first instead of racing it.
exec 9>"$K8S_CACHE/.build.lock"
flock 9

# have DIR NAME...: every named binary is cached in DIR.
have() {
  local dir=$1; shift
  local n
  for n in "$@"; do [ -x "$dir/$n" ] || return 1; done
}

# A build goes to DIR.tmp and is renamed into place whole, so an interrupted build never
# leaves a directory that looks complete.
start_dir() { rm -rf "$1.tmp"; mkdir -p "$1.tmp"; }
finish_dir() { rm -rf "$1"; mv "$1.tmp" "$1"; }

build_control_plane() {
  local mains=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
  have "$K8S_BIN_DIR" "${mains[@]}" etcd && return 0
  log "building Kubernetes $K8S_VERSION (${mains[*]}) and etcd $ETCD_VERSION; several minutes on a cold cache"
  local t0=$SECONDS src=$K8S_CACHE/src/kubernetes-$K8S_VERSION
  rm -rf "$src"; mkdir -p "$src"
  # k8s.io/kubernetes replaces its staging modules with ./staging paths, which only work
  # inside its own tree; a wrapper module requires it and points each staging module at its
  # published v0.MINOR.PATCH instead. The two sample modules are left out: the proxy does not
  # serve those versions and nothing here needs them.
  local staging_version=v0.${K8S_VERSION#v1.}
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module composebox.local/k8s-build"
    echo
    echo "go 1.24"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes $K8S_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo ")"
    echo
    sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$gomod" |
      grep -v -E '^k8s\.io/sample-(cli-plugin|controller)$' |
      while read -r m; do echo "replace $m => $m $staging_version"; done
  } >"$src/go.mod"
  # The mains' own imports, so that `go mod tidy` records every module they need.
  cat >"$src/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	_ "k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
	_ "go.etcd.io/etcd/server/v3"
)
GO
  (cd "$src" && go mod tidy)
  # Without the stamp the node and `version` report a development build.
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local x="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x="$x -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    x="$x -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  start_dir "$K8S_BIN_DIR"
  # etcd's main is its server module's root package, so go build names it "server".
  (cd "$src" && LDFLAGS_X=$x gobuild -o "$K8S_BIN_DIR.tmp/" "${mains[@]/#/k8s.io/kubernetes/cmd/}" \
    go.etcd.io/etcd/server/v3)
  mv "$K8S_BIN_DIR.tmp/server" "$K8S_BIN_DIR.tmp/etcd"
  local m
  for m in "${mains[@]}" etcd; do
    [ -x "$K8S_BIN_DIR.tmp/$m" ] || { log "go build wrote no $m"; exit 1; }
  done
  finish_dir "$K8S_BIN_DIR"
  log "Kubernetes and etcd built in $((SECONDS - t0)) s"
}

# build_main DIR NAME MODULE@VERSION IMPORT...: a main of our own in a wrapper module that
# requires MODULE; it runs MAIN_BODY (a Go statement) with the packages IMPORT... linked in.
build_main() {
  local dir=$1 name=$2 mod=$3; shift 3
  have "$dir" "$name" && return 0
  log "building $name from $mod"
  local t0=$SECONDS src=$K8S_CACHE/src/$name-${mod##*@}
  rm -rf "$src"; mkdir -p "$src"
  printf 'module composebox.local/%s-build\n\ngo 1.24\n\nrequire %s %s\n' \
    "$name" "${mod%@*}" "${mod##*@}" >"$src/go.mod"
  {
    echo "package main"
    echo
    echo "import ("
    local p
    for p in "$@"; do echo "	$p"; done
    echo ")"
    echo
    echo "func main() { $MAIN_BODY }"
  } >"$src/main.go"
  (cd "$src" && go mod tidy)
  start_dir "$dir"
  (cd "$src" && gobuild -o "$dir.tmp/$name" .)
  finish_dir "$dir"
  log "$name built in $((SECONDS - t0)) s"
}

# go_install DIR NAME PKG@VERSION: modules that build as they are published.
go_install() {
  local dir=$1 name=$2 pkg=$3
  have "$dir" "$name" && return 0
  log "building $pkg"
  local t0=$SECONDS
  start_dir "$dir"
  GOBIN=$dir.tmp nice -n 19 go install -ldflags "-s -w" "$pkg"
  finish_dir "$dir"
  log "$name built in $((SECONDS - t0)) s"
}

build_control_plane
# The Corefile up.sh writes uses bind, errors, ready and kubernetes; CoreDNS skips the
# directives of plugins that are not linked in.
MAIN_BODY='coremain.Run()' build_main "$COREDNS_BIN_DIR" coredns "github.com/coredns/coredns@$COREDNS_VERSION" \
  '"github.com/coredns/coredns/coremain"' \
  '_ "github.com/coredns/coredns/plugin/bind"' \
  '_ "github.com/coredns/coredns/plugin/errors"' \
  '_ "github.com/coredns/coredns/plugin/kubernetes"' \
  '_ "github.com/coredns/coredns/plugin/ready"'
# registry.yml stores on the filesystem with no auth.
MAIN_BODY='_ = registry.RootCmd.Execute()' build_main "$REGISTRY_BIN_DIR" registry \
  "github.com/distribution/distribution/v3@$REGISTRY_VERSION" \
  '"github.com/distribution/distribution/v3/registry"' \
  '_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"'
go_install "$KUBE_ROUTER_BIN_DIR" kube-router \
  "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
