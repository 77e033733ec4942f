#!/usr/bin/env bash
# Exec and file I/O speed of lifecycle/sandboxio against its baselines, in one run:
#   - Exec of `true`            vs the raw Engine API sequence (create, attach, inspect)
#                               and vs `docker exec <ctr> true`;
#   - 10 MiB WriteFile+ReadFile vs `docker cp` in and out;
#   - peak RSS of streaming a 1 GiB file to io.Discard with ReadFileTo.
# The test binary is built once and the benchmarks run in interleaved rounds, so that load
# from anything else on the machine hits every contender alike; the figures are medians.
#
# Usage: bench/exec.sh [ROUNDS]   (default 5; needs a running engine and the docker CLI)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
rounds=${1:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go test -c -o "$work/sandboxio.test" ./lifecycle/sandboxio/

run() { # run BENCH ITERATIONS: prints ns/op (and extra metrics) lines
	"$work/sandboxio.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime "$2" 2>&1 | grep -E "^$1" || {
		echo "bench: $1 failed" >&2
		"$work/sandboxio.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime "$2" >&2 || true
		exit 1
	}
}

: >"$work/results"
for i in $(seq "$rounds"); do
	echo "round $i/$rounds" >&2
	for b in BenchmarkExecTrue BenchmarkRawExecTrue BenchmarkDockerExecCLI; do
		run "$b" 50x >>"$work/results"
	done
	for b in BenchmarkWriteReadFile10MiB BenchmarkDockerCp10MiB; do
		run "$b" 5x >>"$work/results"
	done
done

median() { # median of the ns/op of benchmark $1, in ms
	grep -E "^$1-[0-9]+ " "$work/results" | awk '{print $3}' | sort -n |
		awk '{a[NR]=$1} END {if (NR==0) {print "NaN"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f\n", m/1e6}'
}

ours=$(median BenchmarkExecTrue)
raw=$(median BenchmarkRawExecTrue)
cli=$(median BenchmarkDockerExecCLI)
files=$(median BenchmarkWriteReadFile10MiB)
cp=$(median BenchmarkDockerCp10MiB)

echo "rss: streaming 1 GiB with ReadFileTo (alone in its process)" >&2
rss=$(COMPOSEBOX_BENCH_1GIB=1 run BenchmarkReadFileTo1GiB 1x)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }
printf '\n%-44s %10s\n' "median over $rounds rounds" "ms/op"
printf '%-44s %10s\n' "Exec(true), this package" "$ours"
printf '%-44s %10s\n' "raw Engine API create+attach+inspect" "$raw"
printf '%-44s %10s\n' "docker exec CLI" "$cli"
printf '%-44s %10s\n' "WriteFile+ReadFile 10 MiB" "$files"
printf '%-44s %10s\n' "docker cp in+out 10 MiB" "$cp"
printf '\n%-44s %10s\n' "ratio" ""
printf '%-44s %10s\n' "ours / raw API (must be <= 1.15)" "$(ratio "$ours" "$raw")"
printf '%-44s %10s\n' "ours / docker exec" "$(ratio "$ours" "$cli")"
printf '%-44s %10s\n' "files ours / docker cp" "$(ratio "$files" "$cp")"
echo
echo "1 GiB ReadFileTo: $rss"
