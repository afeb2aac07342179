#!/usr/bin/env bash
# `docker compose` on the images built on this machine (scripts/compose-images.sh), as the
# compose stage runs it: docker-compose.yml with deploy/compose/local-images.yml, project
# outbox-relay. Compose v2 (`docker compose`) when the Docker CLI has it, else Compose 1.29
# (Debian's docker-compose), which does not know the file's top-level `name` (v2's project
# name): it gets a copy without that line and the name as -p, the paths still relative to the
# repository.
#
# Usage: scripts/compose-local.sh COMMAND [ARG...]   e.g. up -d --build, ps, exec relay ..., down -v
# Environment: DOCKER_HOST (scripts/docker-engine.sh env); OUTBOX_COMPOSE (v2 or v1: which to
# use, instead of the one found); the compose file's own variables (OUTBOX_COMPOSE_*_PORT, ...).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
project=$(sed -n 's/^name: *//p' "$repo/docker-compose.yml")
override="$repo/deploy/compose/local-images.yml"

version="${OUTBOX_COMPOSE:-}"
if [ -z "$version" ]; then
  if docker compose version >/dev/null 2>&1; then version=v2; else version=v1; fi
fi
case "$version" in
  v2) exec docker compose --project-directory "$repo" -f "$repo/docker-compose.yml" -f "$override" "$@" ;;
  v1)
    command -v docker-compose >/dev/null || { echo "compose-local: neither \`docker compose\` nor docker-compose (scripts/docker-engine.sh install)" >&2; exit 2; }
    copy="${TMPDIR:-/tmp}/outbox-relay-compose-v1"
    mkdir -p "$copy"
    sed '/^name:/d' "$repo/docker-compose.yml" >"$copy/docker-compose.yml"
    exec docker-compose --project-name "$project" --project-directory "$repo" -f "$copy/docker-compose.yml" -f "$override" "$@"
    ;;
  *) echo "compose-local: OUTBOX_COMPOSE=$version (expected v1 or v2)" >&2; exit 2 ;;
esac
