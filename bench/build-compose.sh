#!/usr/bin/env bash
# Builds the compose v2 CLI (docker/compose v2.40.3, the version composebox embeds) as a
# standalone binary, bin/docker-compose-v2, for the benchmark's baseline. It cannot be built
# from this repository's module (go.sum lacks the CLI's dependencies) and `go install ...@v2.40.3`
# refuses the module's `exclude` directives, so the module's own source, go.mod and go.sum are
# copied out of the module cache into a throwaway directory and built there as the main module.
# A binary already built is reused. Prints the binary's path on success.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
version=${COMPOSE_VERSION:-v2.40.3}
out=$PWD/bin/docker-compose-v2
if [ -x "$out" ] && "$out" version --short 2>/dev/null | grep -qx "${version#v}"; then
	echo "$out"
	exit 0
fi
work=${CBX_COMPOSE_WORK:-/tmp/cbx-compose}
mkdir -p "$work" bin
cd "$work"
# One build at a time; a build that finished while this one waited is reused.
exec 9>"$work/.lock"
flock 9
if [ -x "$out" ] && "$out" version --short 2>/dev/null | grep -qx "${version#v}"; then
	echo "$out"
	exit 0
fi
if [ ! -f go.mod ]; then
	go mod init cbx-compose-fetch >/dev/null 2>&1
fi
# Fetch the module into the cache (proxy.golang.org), then copy its tree out of the cache.
dir=$(go mod download -json "github.com/docker/compose/v2@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] || { echo "build-compose: could not download github.com/docker/compose/v2@$version" >&2; exit 1; }
rm -rf src
cp -r "$dir" src
chmod -R u+w src
cd src
go build -trimpath -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$version" -o "$out.tmp.$$" ./cmd >&2
mv "$out.tmp.$$" "$out"
echo "$out"
