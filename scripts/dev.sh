#!/usr/bin/env bash
# One command to a running relay on this machine, without Docker: starts the local services
# (scripts/stack.sh), builds, creates the outbox table, publication and slot, and runs the
# relay in the foreground with JSON logs. Ctrl-C stops the relay (the services keep running;
# `scripts/stack.sh down` removes them).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules ] || npm ci
scripts/stack.sh up
set -a
# shellcheck disable=SC1091
. "${OUTBOX_STACK_DIR:-.stack}/env"
set +a
npm run --silent build
node dist/cli.js setup
# The young generation size the Dockerfile and `npm start` give it (README: Performance).
exec node --max-semi-space-size=16 dist/cli.js run "$@"
