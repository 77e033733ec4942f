#!/usr/bin/env bash
# Time from "start a sample" to "every service ready" for testdata/projects/multi-service:
# composebox's SampleInit (library, in-process compose) against Debian's docker-compose v1
# (`up -d`, then polling `docker inspect` every 100 ms until every container is running and
# healthy). Runs N samples one at a time for each, and prints the medians and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10}
proj=testdata/projects/multi-service
tmp=$(mktemp -d)
cleanup() {
  for p in $(docker ps -aq --filter label=composebox.bench=ready --format '{{.Label "com.docker.compose.project"}}' | sort -u); do
    docker-compose -p "$p" -f "$proj/compose.yaml" -f "$tmp/override.yaml" down -v -t 1 >/dev/null 2>&1 || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

base=$(go run ./cmd/composebox doctor --build --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print([c["detail"].split()[0] for c in r["checks"] if c["name"]=="base_image"][0])')
export COMPOSEBOX_BASE_IMAGE=$base

echo "== composebox SampleInit (library), $N samples"
go test ./orchestrator -run '^$' -bench SampleInitMultiService -benchtime "${N}x" -count 1 | tee "$tmp/ours.txt" | grep Benchmark
ours=$(awk '/BenchmarkSampleInit/ {for (i=1;i<=NF;i++) if ($(i+1)=="p50-ms") print $i}' "$tmp/ours.txt")

# docker-compose v1 names built images per project: build web once under a fixed tag instead.
cat >"$tmp/override.yaml" <<YAML
version: "3.8"
services:
  default: {labels: {composebox.bench: ready, dev.composebox.managed: "true"}, init: true}
  web: {image: composebox-bench/web:latest, labels: {composebox.bench: ready, dev.composebox.managed: "true"}, init: true}
  db: {labels: {composebox.bench: ready, dev.composebox.managed: "true"}, init: true}
YAML
docker-compose -p cbx-bench-build -f "$proj/compose.yaml" -f "$tmp/override.yaml" build -q web >/dev/null 2>&1

echo "== docker-compose v1 up -d + wait for healthy, $N samples"
times=()
for i in $(seq 1 "$N"); do
  p=cbx-bench-v1-$i-$$
  start=$(date +%s%N)
  docker-compose -p "$p" -f "$proj/compose.yaml" -f "$tmp/override.yaml" up -d >/dev/null 2>&1
  while :; do
    states=$(docker ps -aq --filter "label=com.docker.compose.project=$p" | xargs docker inspect --format '{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}')
    if ! grep -qv -e '^running/healthy$' -e '^running/none$' <<<"$states" && [ "$(wc -l <<<"$states")" -eq 3 ]; then break; fi
    sleep 0.1
  done
  end=$(date +%s%N)
  times+=($(( (end - start) / 1000000 )))
  docker-compose -p "$p" -f "$proj/compose.yaml" -f "$tmp/override.yaml" down -v -t 1 >/dev/null 2>&1
done
theirs=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "docker-compose v1 samples (ms): ${times[*]}"
echo
printf '%-40s %8s\n' "SampleInit-to-ready, median" "ms"
printf '%-40s %8s\n' "composebox (library)" "$ours"
printf '%-40s %8s\n' "docker-compose v1 up -d + poll" "$theirs"
awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "%-40s %8.2fx\n", "ratio composebox / docker-compose", a/b}'
