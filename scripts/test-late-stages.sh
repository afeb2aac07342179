#!/usr/bin/env bash
# `npm test`'s stages after the main run, side by side: the Postgres version matrix
# (scripts/test-postgres-versions.sh, the local stack's Kafka and a Postgres of each major) and the
# compose stage (scripts/test-compose.sh, on its own Docker engine, images and ports). They share
# nothing, and most of each is waiting (on a relay's restarts, on JVMs starting in containers):
# one after the other they took 236 + 153 s here, side by side about the longer of the two,
# which keeps CI's whole run under its time budget. Each line is prefixed with its stage; the
# exit status is 1 if either failed, and both always run to their end.
set -uo pipefail
cd "$(dirname "$0")/.."

stage() {
  local name=$1
  shift
  "$@" 2>&1 | sed -u "s/^/[$name] /"
}

started=$SECONDS
stage versions scripts/test-postgres-versions.sh &
versions=$!
stage compose scripts/test-compose.sh &
compose=$!
failed=()
wait "$versions" || failed+=(versions)
wait "$compose" || failed+=(compose)
echo "late stages: done in $((SECONDS - started)) s${failed[*]:+; FAILED: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
