#!/usr/bin/env bash
# Builds the local Kubernetes fixture's binaries from Go modules into K8S_CACHE, once per
# version: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl; etcd;
# CoreDNS; kube-router; the distribution registry. What is already cached is left alone, so a
# warm run takes well under a second.
#
# The builds are niced, so that a machine's other work goes first, and use every core (set
# K8S_GOFLAGS=-p=1 to compile one package at a time on a crowded machine). Every go command
# here shares the one Go build cache with the same flags, and the Kubernetes binaries are one
# `go build` of all five, so a package they share is compiled once and the package graph is
# loaded once. A cold build takes about ten minutes on 2 idle cores.
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

build_kubernetes() {
  local mains=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
  have "$K8S_BIN_DIR" "${mains[@]}" && return 0
  log "building Kubernetes $K8S_VERSION (${mains[*]}); several minutes on a cold cache"
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
    echo "require k8s.io/kubernetes $K8S_VERSION"
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
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubectl/pkg/cmd/util"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
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
  (cd "$src" && LDFLAGS_X=$x gobuild -o "$K8S_BIN_DIR.tmp/" "${mains[@]/#/k8s.io/kubernetes/cmd/}")
  local m
  for m in "${mains[@]}"; do
    [ -x "$K8S_BIN_DIR.tmp/$m" ] || { log "go build wrote no $m"; exit 1; }
  done
  finish_dir "$K8S_BIN_DIR"
  log "Kubernetes built in $((SECONDS - t0)) s"
}

build_etcd() {
  have "$ETCD_BIN_DIR" etcd && return 0
  log "building etcd $ETCD_VERSION"
  local t0=$SECONDS src=$K8S_CACHE/src/etcd-$ETCD_VERSION
  rm -rf "$src"; mkdir -p "$src"
  # etcd's server module is a main package of its own; a wrapper pins it.
  printf 'module composebox.local/etcd-build\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
    "$ETCD_VERSION" >"$src/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$src/tools.go"
  (cd "$src" && go mod tidy)
  start_dir "$ETCD_BIN_DIR"
  (cd "$src" && gobuild -o "$ETCD_BIN_DIR.tmp/etcd" go.etcd.io/etcd/server/v3)
  finish_dir "$ETCD_BIN_DIR"
  log "etcd built in $((SECONDS - t0)) s"
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

build_kubernetes
build_etcd
go_install "$COREDNS_BIN_DIR" coredns "github.com/coredns/coredns@$COREDNS_VERSION"
go_install "$KUBE_ROUTER_BIN_DIR" kube-router \
  "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
go_install "$REGISTRY_BIN_DIR" registry \
  "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
