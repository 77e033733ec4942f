#!/usr/bin/env bash
# Runs run.sh's self-check and one-service eval (of the tests marked `backends`) with the
# provider's servers spread over two private Docker engines (bin/testdockerd: each its own data
# root, socket and bridge; the host's engine is left alone), as COMPOSEBOX_TEST_ENGINES tells the
# tests. What placement does not change (exec_remote, the time limit) runs on one engine only,
# to keep CI's time. The engines go when it ends.
# Usage: scripts/inspect/engines.sh [pytest args...]   (root; make test-inspect runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root_dir=$(cd "$here/../.." && pwd)
LOG_PREFIX=test-inspect-engines
. "$here/common.sh"

src=${INSPECT_SRC:-$(realpath -m "$root_dir/../shared/inspect_ai")}
if [ ! -d "$src/src/inspect_ai" ]; then
  log "NOTICE: skipped the tests on the real inspect_ai over several engines: no inspect_ai source at $src"
  exit 0
fi

coproc ENGINES { exec "$root_dir/bin/testdockerd" -n 2 -prefix cbxpi; }
engines=()
while read -r line <&"${ENGINES[0]}"; do
  case $line in
    "engine "*) engines+=("${line#engine }") ;;
    ready) break ;;
  esac
done
[ ${#engines[@]} -eq 2 ] || die "the private engines did not start"
log "engines: ${engines[*]}"
status=0
COMPOSEBOX_TEST_ENGINES=$(IFS=,; echo "${engines[*]}") "$here/run.sh" -m backends -k "self_check or one_service" "$@" || status=$?
# Closing its stdin stops the daemons and removes what they had.
exec {ENGINES[1]}>&-
wait "$ENGINES_PID" || true
exit $status
