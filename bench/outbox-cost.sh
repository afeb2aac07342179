#!/usr/bin/env bash
# What one outbox event costs the primary, side by side in one run on one throwaway cluster:
#   table  the relay's outbox table (primary key + created_at index), later pruned by DELETE
#   emit   a transactional pg_logical_emit_message (the message outbox, docs/outboxes.md)
#   poll   a polling relay's outbox (status + partial index), later marked sent
# Each: N one-event transactions by pgbench at C clients; then the transactions/s, WAL bytes per
# event, and the CPU of the walsender that streams the backlog through pgoutput (pg_recvlogical,
# messages on) into /dev/null. The table's prune and the poller's mark-sent are measured after.
# Then, for each count in SLOT_TABLES (default "4 100"): N events spread over that many outbox
# tables, streamed through one slot (one publication of every table) and through one slot per
# table: the walsenders' CPU per event, summed (each slot decodes the whole WAL again), as one-event transactions.
# Usage: bench/outbox-cost.sh   (PGBIN=/usr/lib/postgresql/15/bin N=50000 C=4 PORT=56999 FSYNC=on)
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}; N=${N:-50000}; C=${C:-4}; PORT=${PORT:-56999}
if (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; then echo "port $PORT is in use (another run of this script?); set PORT" >&2; exit 1; fi
D=$(mktemp -d /tmp/outbox-cost.XXXX); trap '$PGBIN/pg_ctl -D $D/data -m immediate stop >/dev/null 2>&1 || true; rm -rf $D' EXIT
chown -R postgres "$D" 2>/dev/null || true
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
as_pg $PGBIN/initdb -D $D/data -U postgres -A trust >/dev/null
cat >> $D/data/postgresql.conf <<CONF
port=$PORT
listen_addresses='127.0.0.1'
unix_socket_directories='$D'
wal_level=logical
max_wal_senders=10
max_replication_slots=128
fsync=${FSYNC:-on}
synchronous_commit=on
shared_buffers=512MB
max_wal_size=8GB
autovacuum=off
CONF
as_pg $PGBIN/pg_ctl -D $D/data -l $D/log -w start >/dev/null
P="$PGBIN/psql -XqAt -h 127.0.0.1 -p $PORT -U postgres -d postgres"
$P -c "CREATE TABLE event_outbox (event_id text PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
  event_type text NOT NULL, payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now());
  CREATE INDEX ON event_outbox (created_at);
  CREATE TABLE poll_outbox (id bigserial PRIMARY KEY, event_id text NOT NULL UNIQUE, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
  event_type text NOT NULL, payload jsonb NOT NULL, status text NOT NULL DEFAULT 'pending', created_at timestamptz NOT NULL DEFAULT now(), sent_at timestamptz);
  CREATE INDEX ON poll_outbox (created_at) WHERE status = 'pending';
  CREATE PUBLICATION pub_table FOR TABLE event_outbox WITH (publish = 'insert');
  CREATE PUBLICATION pub_none FOR TABLE poll_outbox WITH (publish = 'insert');"
PAYLOAD='{"invoice_id":"inv_000000000042","customer_id":"cus_0000000000001234","amount_cents":125000,"currency":"EUR","lines":[{"sku":"plan-pro","qty":1,"unit_cents":125000}],"period":{"start":"2026-11-01","end":"2026-11-30"},"note":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}'
cat > $D/table.sql <<SQL
INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
VALUES (md5(random()::text), 'invoice', 'inv_' || (random()*1000)::int, 'invoice.paid', '$PAYLOAD', '{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}');
SQL
cat > $D/emit.sql <<SQL
SELECT pg_logical_emit_message(true, 'outbox', json_build_object('event_id', md5(random()::text), 'aggregate_type', 'invoice',
  'aggregate_id', 'inv_' || (random()*1000)::int, 'event_type', 'invoice.paid', 'payload', '$PAYLOAD'::json,
  'headers', '{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'::json)::text);
SQL
cat > $D/poll.sql <<SQL
INSERT INTO poll_outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
VALUES (md5(random()::text), 'invoice', 'inv_' || (random()*1000)::int, 'invoice.paid', '$PAYLOAD');
SQL
walsender_cpu() { # $1 slot, $2 publication, $3 end lsn: CPU seconds of the walsender that streams to $3
  local out=$D/recv.$1
  $PGBIN/pg_recvlogical -h 127.0.0.1 -p $PORT -U postgres -d postgres -S $1 --start -E $3 -o proto_version=1 -o publication_names=$2 -o messages=true -f - > $out 2>/dev/null &
  local rp=$!; local wpid=""
  for _ in $(seq 1 100); do wpid=$($P -c "SELECT active_pid FROM pg_replication_slots WHERE slot_name='$1'"); [ -n "$wpid" ] && break; sleep 0.05; done
  local t0=$(date +%s.%N); local c0=$(awk '{print $14+$15}' /proc/$wpid/stat 2>/dev/null || echo 0); local cl=$c0
  while kill -0 $rp 2>/dev/null; do cl=$(awk '{print $14+$15}' /proc/$wpid/stat 2>/dev/null || echo $cl); sleep 0.05; done
  local t1=$(date +%s.%N)
  echo "$(echo "($cl-$c0)/$(getconf CLK_TCK)" | bc -l) $(echo "$t1-$t0" | bc -l) $(stat -c %s $out)"
}
for kind in table emit poll; do
  slot=s_$kind; pub=pub_table; [ $kind = poll ] && pub=pub_none
  $P -c "CHECKPOINT" >/dev/null
  $P -c "SELECT pg_create_logical_replication_slot('$slot', 'pgoutput')" >/dev/null
  l0=$($P -c "SELECT pg_current_wal_lsn()")
  tps=$($PGBIN/pgbench -h 127.0.0.1 -p $PORT -U postgres -n -c $C -j 2 -t $((N / C)) -f $D/$kind.sql postgres 2>/dev/null | awk '/^tps/ {print $3; exit}')
  l1=$($P -c "SELECT pg_current_wal_lsn()")
  wal=$($P -c "SELECT pg_wal_lsn_diff('$l1','$l0')")
  extra=""
  if [ $kind = poll ]; then  # the poller's work: mark everything sent, in batches of 1000
    l2=$($P -c "SELECT pg_current_wal_lsn()")
    t0=$(date +%s.%N)
    while [ "$($P -c "WITH b AS (SELECT id FROM poll_outbox WHERE status='pending' ORDER BY created_at LIMIT 1000 FOR UPDATE SKIP LOCKED) UPDATE poll_outbox p SET status='sent', sent_at=now() FROM b WHERE p.id=b.id RETURNING 1" | wc -l)" -gt 0 ]; do :; done
    t1=$(date +%s.%N)
    l3=$($P -c "SELECT pg_current_wal_lsn()")
    extra=" mark-sent WAL/event $(( $($P -c "SELECT pg_wal_lsn_diff('$l3','$l2')::bigint") / N )) B, mark-sent wall $(echo "$t1-$t0" | bc -l | cut -c1-5) s"
  fi
  read cpu wall bytes < <(walsender_cpu $slot $pub $l1)
  printf '%-6s tps %8.0f  WAL/event %5d B  walsender %6.1f us/event (%.1f s wall, %s bytes out)%s\n' $kind "$tps" $(( ${wal%.*} / N )) "$(echo "$cpu*1000000/$N" | bc -l)" "$wall" "$bytes" "$extra"
  $P -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null
done
if [ "${PRUNE:-1}" = 1 ]; then  # the relay's prune of the whole table: a DELETE's WAL per event
  l0=$($P -c "SELECT pg_current_wal_lsn()")
  $P -c "DELETE FROM event_outbox" >/dev/null
  l1=$($P -c "SELECT pg_current_wal_lsn()")
  echo "table prune (DELETE) WAL/event $(( $($P -c "SELECT pg_wal_lsn_diff('$l1','$l0')::bigint") / N )) B"
fi
for tables in ${SLOT_TABLES:-4 100}; do
  $P -c "CHECKPOINT" >/dev/null
  names=""
  for k in $(seq 1 $tables); do
    $P -c "CREATE TABLE outbox_$k (LIKE event_outbox INCLUDING ALL); CREATE PUBLICATION pub_$k FOR TABLE outbox_$k WITH (publish = 'insert')" >/dev/null
    names="$names${names:+, }outbox_$k"
  done
  $P -c "CREATE PUBLICATION pub_all FOR TABLE $names WITH (publish = 'insert')" >/dev/null
  $P -c "SELECT pg_create_logical_replication_slot('s_all', 'pgoutput')" >/dev/null
  for k in $(seq 1 $tables); do $P -c "SELECT pg_create_logical_replication_slot('s_$k', 'pgoutput')" >/dev/null; done
  # The same N one-event transactions as above, each into one of the tables at random.
  sed 's/INSERT INTO event_outbox/\\set k random(1, '$tables')\nINSERT INTO outbox_:k/' $D/table.sql > $D/tables.sql
  $PGBIN/pgbench -h 127.0.0.1 -p $PORT -U postgres -n -c $C -j 2 -t $((N / C)) -f $D/tables.sql postgres >/dev/null 2>&1
  end=$($P -c "SELECT pg_current_wal_lsn()")
  read one _ _ < <(walsender_cpu s_all pub_all $end)
  many=0
  for k in $(seq 1 $tables); do read cpu _ _ < <(walsender_cpu s_$k pub_$k $end); many=$(echo "$many+$cpu" | bc -l); done
  events=$(( (N / C) * C ))
  printf '%3d tables  one slot %6.1f us/event  %3d slots %7.1f us/event  one slot / %d slots = %.0f%%\n' $tables "$(echo "$one*1000000/$events" | bc -l)" $tables "$(echo "$many*1000000/$events" | bc -l)" $tables "$(echo "$one*100/$many" | bc -l)"
  $P -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 's\_%'" >/dev/null
  $P -c "DROP PUBLICATION pub_all" >/dev/null
  for k in $(seq 1 $tables); do $P -c "DROP PUBLICATION pub_$k; DROP TABLE outbox_$k" >/dev/null; done
done
