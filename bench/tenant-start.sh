#!/usr/bin/env bash
# How long `run` takes from its start to streaming with a schema per tenant, side by side for two
# builds: `bench/tenant-start.sh [OTHER_REPO_DIR]` (a checkout with its own `npm run build`;
# without one, this build alone). Makes TENANTS (default 4000) tenant schemas, each with an
# outbox table, in the Postgres of DATABASE_URL (default: the test stack's, `scripts/stack.sh
# up`), runs `setup` once with {"tables": "startab_*.event_outbox"}, then ROUNDS (default 3)
# rounds of `run` of each build, alternating, timed to its "active: streaming" line. Then, for
# this build, `recover` after the slot was dropped, timed with RECOVER_ROWS (default 20000) rows
# in one tenant's table, then with as many spread over every tenant. Drops everything it made at
# the end.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
other="${1:-}"
tenants="${TENANTS:-4000}"
rounds="${ROUNDS:-3}"
export PATH="$("$here/scripts/node-lts.sh"):$PATH"
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:55432/outbox}"
export KAFKA_BROKERS="${KAFKA_BROKERS:-127.0.0.1:59092}"
export OUTBOX_SOURCES='[{"tables":"startab_*.event_outbox"}]' OUTBOX_SLOT=startab OUTBOX_PUBLICATION=startab OUTBOX_HTTP_PORT=0 OUTBOX_TOPIC_TEMPLATE='startab.{aggregate_type}'
work="$(mktemp -d)"

cleanup() {
  psql -q "$DATABASE_URL" -c "SELECT pg_drop_replication_slot('startab') FROM pg_replication_slots WHERE slot_name = 'startab' AND NOT active" >/dev/null || true
  psql -q "$DATABASE_URL" -c "DROP EVENT TRIGGER IF EXISTS outbox_relay_startab_adds_tables; DROP FUNCTION IF EXISTS public.outbox_relay_startab_adds_tables(); DROP PUBLICATION IF EXISTS startab" >/dev/null || true
  for from in $(seq 1 500 "$tenants"); do
    psql -q "$DATABASE_URL" -c "DO \$\$ BEGIN FOR i IN $from..$((from + 499)) LOOP EXECUTE format('DROP SCHEMA IF EXISTS startab_%s CASCADE', lpad(i::text, 5, '0')); END LOOP; END \$\$;" >/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

echo "[tenant-start] making $tenants tenant schemas"
# 500 a transaction: one transaction making thousands of tables runs out of lock slots.
for from in $(seq 1 500 "$tenants"); do
  to=$((from + 499 < tenants ? from + 499 : tenants))
  psql -q "$DATABASE_URL" -c "DO \$\$ BEGIN FOR i IN $from..$to LOOP
    EXECUTE format('CREATE SCHEMA startab_%s', lpad(i::text, 5, '0'));
    EXECUTE format('CREATE TABLE startab_%s.event_outbox (event_id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now())', lpad(i::text, 5, '0'));
  END LOOP; END \$\$;"
done
start=$(date +%s.%N)
node "$here/dist/cli.js" setup >"$work/setup.log" 2>&1 || { tail -5 "$work/setup.log"; exit 1; }
echo "[tenant-start] setup: $(echo "$(date +%s.%N) - $start" | bc) s"

# Seconds from the start of `run` of the build in $1 to its "active: streaming" line, and its log's lines.
time_run() {
  local log="$work/run.log"
  local began
  began=$(date +%s.%N)
  node "$1/dist/cli.js" run >"$log" 2>&1 &
  local pid=$!
  until grep -q '"active: streaming' "$log"; do
    sleep 0.02
    kill -0 "$pid" 2>/dev/null || { tail -3 "$log"; exit 1; }
  done
  local seconds
  seconds=$(echo "$(date +%s.%N) - $began" | bc)
  kill -TERM "$pid"
  wait "$pid" || true
  echo "$seconds s to streaming, $(wc -l <"$log") log lines"
}

for round in $(seq 1 "$rounds"); do
  [ -n "$other" ] && echo "[tenant-start] round $round, $other: $(time_run "$other")"
  echo "[tenant-start] round $round, this build: $(time_run "$here")"
done

# `recover` of this build with the slot dropped and $1 rows in the tenants' tables, timed; the rows deleted after.
time_recover() {
  psql -q "$DATABASE_URL" -c "SELECT pg_drop_replication_slot('startab')" >/dev/null
  local began
  began=$(date +%s.%N)
  node "$here/dist/cli.js" recover >"$work/recover.log" 2>&1 || { tail -5 "$work/recover.log"; exit 1; }
  echo "$(echo "$(date +%s.%N) - $began" | bc) s, $(grep '^published again' "$work/recover.log")"
  psql -q "$DATABASE_URL" -c "DO \$\$ BEGIN FOR i IN 1..$tenants LOOP EXECUTE format('DELETE FROM startab_%s.event_outbox', lpad(i::text, 5, '0')); END LOOP; END \$\$;" >/dev/null
}

recover_rows="${RECOVER_ROWS:-20000}"
insert_rows() { # $1: the tenant's number, $2: how many rows
  echo "EXECUTE format('INSERT INTO startab_%s.event_outbox (event_id, aggregate_type, aggregate_id, event_type, payload) SELECT gen_random_uuid(), ''invoice'', ''inv-'' || n %% 50, ''invoice.paid'', ''{\"amount_cents\": 1250}'' FROM generate_series(1, $2) n', lpad(($1)::text, 5, '0'));"
}
psql -q "$DATABASE_URL" -c "DO \$\$ BEGIN $(insert_rows 1 "$recover_rows") END \$\$;" >/dev/null
echo "[tenant-start] recover, $recover_rows rows in 1 of $tenants tenants: $(time_recover)"
per_tenant=$(( (recover_rows + tenants - 1) / tenants ))
psql -q "$DATABASE_URL" -c "DO \$\$ BEGIN FOR i IN 1..$tenants LOOP $(insert_rows i "$per_tenant") END LOOP; END \$\$;" >/dev/null
echo "[tenant-start] recover, $per_tenant rows in each of $tenants tenants: $(time_recover)"
