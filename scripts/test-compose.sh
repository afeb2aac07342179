#!/usr/bin/env bash
# The compose stage (issue 65; `npm test` runs it last): docker-compose.yml started, fed and
# faulted on a real Docker engine, every image built on this machine (scripts/compose-images.sh,
# deploy/compose/local-images.yml), by test/compose/stack.compose.ts: up -d --build, every
# container healthy, an event from Postgres to Kafka and through the webhooks service to a
# receiver added through the API, status through exec, kill + up with nothing lost, the standby
# taking over, Prometheus scraping, down -v leaving nothing.
#
# The engine: scripts/docker-engine.sh's (install it first, as root). Started here if it does not
# answer, and then stopped at the end; one already running (.ci/run starts it) is left running.
# Host ports: 214xx/210xx/212xx (OUTBOX_COMPOSE_*_PORT), below the ephemeral range and apart
# from the machine's own Postgres (5432) and the test stack's (scripts/stack.sh).
#
# Usage: scripts/test-compose.sh     prints the figures (image size, times, events lost) at the end
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

export "$(scripts/docker-engine.sh env)"
if ! scripts/docker-engine.sh status; then
  scripts/docker-engine.sh start
  trap 'scripts/docker-engine.sh stop' EXIT
fi

export OUTBOX_COMPOSE_POSTGRES_PORT="${OUTBOX_COMPOSE_POSTGRES_PORT:-21432}"
export OUTBOX_COMPOSE_KAFKA_PORT="${OUTBOX_COMPOSE_KAFKA_PORT:-21092}"
export OUTBOX_COMPOSE_REGISTRY_PORT="${OUTBOX_COMPOSE_REGISTRY_PORT:-21081}"
export OUTBOX_COMPOSE_RELAY_PORT="${OUTBOX_COMPOSE_RELAY_PORT:-21464}"
export OUTBOX_COMPOSE_PRUNER_PORT="${OUTBOX_COMPOSE_PRUNER_PORT:-21465}"
export OUTBOX_COMPOSE_WEBHOOKS_PORT="${OUTBOX_COMPOSE_WEBHOOKS_PORT:-21466}"
export OUTBOX_COMPOSE_STANDBY_PORT="${OUTBOX_COMPOSE_STANDBY_PORT:-21467}"
export OUTBOX_COMPOSE_API_PORT="${OUTBOX_COMPOSE_API_PORT:-21088}"
export OUTBOX_COMPOSE_PROMETHEUS_PORT="${OUTBOX_COMPOSE_PROMETHEUS_PORT:-21090}"
export OUTBOX_COMPOSE_GRAFANA_PORT="${OUTBOX_COMPOSE_GRAFANA_PORT:-21300}"
# The test's receiver listens on the compose network's gateway, a private address the webhooks
# service refuses unless allowed: the engine's networks (scripts/docker-engine.sh).
export OUTBOX_WEBHOOK_ALLOW_ADDRESSES="${OUTBOX_DOCKER_POOL:-10.213.0.0/16}"

images_started=$SECONDS
scripts/compose-images.sh
images_seconds=$((SECONDS - images_started))

figures="$(mktemp)"
status=0
OUTBOX_COMPOSE_FIGURES="$figures" npx vitest run --config test/compose/vitest.config.ts || status=$?
echo "compose stage: stand-in images $images_seconds s, whole stage $((SECONDS - started)) s"
echo "compose stage: figures $(tr -d ' \n' <"$figures")"
rm -f "$figures"
exit "$status"
