#!/usr/bin/env bash
# Validates the deployment files offline (no Docker engine, no cluster, no network):
#   1. docker-compose.yml and deploy/compose/secured.override.yml against the compose-spec JSON
#      schema bundled in dclint, plus lint rules (scripts/validate-deploy/dclint.json);
#   2. deploy/kubernetes/* against the Kubernetes and Prometheus Operator schemas bundled in
#      kubernetes-models, their TypeScript types (unknown fields) and cross-references;
#      secrets (scripts/validate-deploy/secrets.ts): none as an environment value, every file a
#      variable names mounted read-only from a Secret or a compose secret, and each workload's
#      configuration loaded as the relay loads it, as its own Postgres role;
#   3. PromQL of the alerts and the Grafana dashboard (lezer-promql), metric names and labels
#      against the metrics src/ defines and prom-client's default metrics;
#   4. every alert's runbook_url: <runbook base>/<AlertName>.md, the page in docs/runbooks;
#      compose Prometheus config and rules;
#   5. if `promtool` is on PATH (Debian: apt-get install prometheus), also
#      `promtool check config`, `promtool check rules` and the alert unit tests in
#      scripts/validate-deploy/alerts.test.yml (VALIDATE_DEPLOY_PROMTOOL=required makes its
#      absence an error).
# Usage: scripts/validate-deploy.sh [--write-rules] [--runbook-base <url>]
#   --write-rules  regenerate deploy/prometheus/rules/outbox-relay.rules.yml from the PrometheusRule
#   --runbook-base <url>  first point every runbook_url of the PrometheusRule at <url>/<AlertName>.md
#                  (where your copy of docs/runbooks is browsable); with --write-rules, the compose file too
set -euo pipefail
cd "$(dirname "$0")/.."

for pkg in dclint kubernetes-models @kubernetes-models/prometheus-operator @prometheus-io/lezer-promql yaml prom-client typescript tsx; do
  [ -d "node_modules/$pkg" ] || { echo "validate-deploy: node_modules/$pkg missing: run npm ci" >&2; exit 2; }
done

echo "validate-deploy: docker-compose.yml, deploy/compose/secured.override.yml (compose-spec schema, dclint)"
node_modules/.bin/dclint --config scripts/validate-deploy/dclint.json --max-warnings 0 --color false docker-compose.yml
# An override file has no project name of its own.
node_modules/.bin/dclint deploy/compose/secured.override.yml --config scripts/validate-deploy/dclint.json \
  --max-warnings 0 --color false --disable-rule require-project-name-field
echo "  ok    both match the compose-spec schema; no lint findings"

echo "validate-deploy: Kubernetes manifests, alerts, dashboard, Prometheus config"
node_modules/.bin/tsx scripts/validate-deploy/validate.ts "$@"

if command -v promtool >/dev/null 2>&1; then
  echo "validate-deploy: promtool ($(promtool --version 2>&1 | head -n1))"
  promtool check config --lint=all deploy/prometheus/prometheus.yml
  promtool check rules --lint=all deploy/prometheus/rules/*.rules.yml
  promtool test rules scripts/validate-deploy/alerts.test.yml
elif [ "${VALIDATE_DEPLOY_PROMTOOL:-}" = required ]; then
  echo "validate-deploy: promtool not found (apt-get install prometheus)" >&2
  exit 1
else
  echo "  skip  promtool not installed (optional: apt-get install prometheus)"
fi
echo "validate-deploy: all checks passed"
