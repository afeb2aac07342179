#!/usr/bin/env bash
# What one outbox event costs the primary, side by side in one run on one throwaway cluster:
#   table  the relay's outbox table (primary key + created_at index), later pruned by DELETE
#   emit   a transactional pg_logical_emit_message (the message outbox, docs/outboxes.md), its
#          content JSON text made by the application, as the client kit's writer sends it
#   emitsql the same message with its content built and checked by Postgres (json_build_object,
#          the payload cast to json), as a trigger or a SQL function would emit it
#   poll   a polling relay's outbox (status + partial index), later marked sent
# Each: N one-event transactions by pgbench at C clients; then the transactions/s, WAL bytes per
# event, and the CPU of the walsender that streams the backlog through pgoutput (pg_recvlogical,
# messages on) into a file, and how much of that CPU is the kernel's (system time: mostly its
# loopback writes, one per message). The table's prune and the poller's mark-sent are measured after.
# Then, for each count in SLOT_TABLES (default "4 100"): N events spread over that many outbox
# tables, streamed through one slot (one publication of every table) and through one slot per
# table: the walsenders' CPU per event, summed (each slot decodes the whole WAL again), as one-event transactions.
# ROUNDS (default 3) repeats all of it, the kinds taking turns, on tables emptied each round; the
# ratios the floors name are printed per round and as medians (this machine is shared: one round
# of transactions/s can move 1.5x).
# Usage: bench/outbox-cost.sh   (PGBIN=/usr/lib/postgresql/15/bin N=50000 C=4 PORT=56999 FSYNC=on ROUNDS=3)
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}; N=${N:-50000}; C=${C:-4}; PORT=${PORT:-56999}; ROUNDS=${ROUNDS:-3}
if (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; then echo "port $PORT is in use (another run of this script?); set PORT" >&2; exit 1; fi
D=$(mktemp -d /tmp/outbox-cost.XXXX); trap 'as_pg $PGBIN/pg_ctl -D $D/data -m immediate stop >/dev/null 2>&1 || true; cat $D/recv.*.err >&2 2>/dev/null; rm -rf $D' EXIT
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
SELECT pg_logical_emit_message(true, 'outbox', '{"event_id":"' || md5(random()::text) || '","aggregate_type":"invoice","aggregate_id":"inv_' || (random()*1000)::int
  || '","event_type":"invoice.paid","payload":$PAYLOAD,"headers":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}');
SQL
cat > $D/emitsql.sql <<SQL
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
  $PGBIN/pg_recvlogical -h 127.0.0.1 -p $PORT -U postgres -d postgres -S $1 --start -E $3 -o proto_version=1 -o publication_names=$2 -o messages=true -f - > $out 2>$out.err &
  local rp=$!; local wpid=""
  for _ in $(seq 1 100); do wpid=$($P -c "SELECT active_pid FROM pg_replication_slots WHERE slot_name='$1'"); [ -n "$wpid" ] && break; sleep 0.05; done
  # Not seen: the stream ended before its first sample (N too small to time), or never started.
  if [ -z "$wpid" ]; then echo "slot $1: no walsender seen streaming it ($(cat $out.err)); raise N" >&2; kill $$; exit 1; fi
  local t0=$(date +%s.%N); local c0 s0; read c0 s0 < <(awk '{print $14+$15, $15}' /proc/$wpid/stat); local cl=$c0 sl=$s0
  while kill -0 $rp 2>/dev/null; do read cl sl < <(awk '{print $14+$15, $15}' /proc/$wpid/stat 2>/dev/null || echo $cl $sl); sleep 0.05; done
  local t1=$(date +%s.%N)
  echo "$(echo "($cl-$c0)/$(getconf CLK_TCK)" | bc -l) $(echo "$t1-$t0" | bc -l) $(stat -c %s $out) $(echo "($sl-$s0)/$(getconf CLK_TCK)" | bc -l)"
}
RATIOS=$D/ratios  # one line per round and figure a floor names: name, value
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for round in $(seq 1 $ROUNDS); do
echo "round $round of $ROUNDS"
$P -c "TRUNCATE event_outbox, poll_outbox" >/dev/null
for kind in table emit emitsql poll; do
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
  read cpu wall bytes sys < <(walsender_cpu $slot $pub $l1)
  printf '%-6s tps %8.0f  WAL/event %5d B  walsender %6.1f us/event, system %4.1f (%.1f s wall, %s bytes out)%s\n' $kind "$tps" $(( ${wal%.*} / N )) "$(echo "$cpu*1000000/$N" | bc -l)" "$(echo "$sys*1000000/$N" | bc -l)" "$wall" "$bytes" "$extra"
  echo "$tps" > $D/tps.$kind; echo "${wal%.*}" > $D/wal.$kind
  $P -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null
done
if [ "${PRUNE:-1}" = 1 ]; then  # the relay's prune of the whole table: a DELETE's WAL per event
  l0=$($P -c "SELECT pg_current_wal_lsn()")
  $P -c "DELETE FROM event_outbox" >/dev/null
  l1=$($P -c "SELECT pg_current_wal_lsn()")
  prune=$($P -c "SELECT pg_wal_lsn_diff('$l1','$l0')::bigint")
  echo "table prune (DELETE) WAL/event $(( prune / N )) B"
  echo "$(cat $D/wal.emit) $(cat $D/wal.table) $prune" | awk '{ printf "wal %.4f\n", $1 / ($2 + $3) }' >> $RATIOS
fi
echo "$(cat $D/tps.emit) $(cat $D/tps.emitsql) $(cat $D/tps.table)" | awk '{ printf "tps %.4f\ntpssql %.4f\n", $1 / $3, $2 / $3 }' >> $RATIOS
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
  read one _ _ onesys < <(walsender_cpu s_all pub_all $end)
  many=0; manysys=0
  for k in $(seq 1 $tables); do read cpu _ _ sys < <(walsender_cpu s_$k pub_$k $end); many=$(echo "$many+$cpu" | bc -l); manysys=$(echo "$manysys+$sys" | bc -l); done
  events=$(( (N / C) * C ))
  printf '%3d tables  one slot %6.1f us/event (system %4.1f)  %3d slots %7.1f us/event (system %6.1f)  one slot / %d slots = %.0f%%\n' $tables "$(echo "$one*1000000/$events" | bc -l)" "$(echo "$onesys*1000000/$events" | bc -l)" $tables "$(echo "$many*1000000/$events" | bc -l)" "$(echo "$manysys*1000000/$events" | bc -l)" $tables "$(echo "$one*100/$many" | bc -l)"
  echo "slots$tables $(echo "$one/$many" | bc -l)" >> $RATIOS
  $P -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 's\_%'" >/dev/null
  $P -c "DROP PUBLICATION pub_all" >/dev/null
  for k in $(seq 1 $tables); do $P -c "DROP PUBLICATION pub_$k; DROP TABLE outbox_$k" >/dev/null; done
done
done
echo "floors, per round and median of $ROUNDS:"
floor() { # $1 name in $RATIOS, $2 label, $3 awk test of the median m, $4 unit: x or %
  local values; values=$(awk -v n=$1 '$1 == n { print $2 }' $RATIOS)
  [ -n "$values" ] || return 0
  local m; m=$(echo "$values" | median)
  local shown; shown=$(echo "$values" | awk -v u=$4 '{ printf (u == "x" ? "%.2fx " : "%.0f%% "), (u == "x" ? $1 : $1 * 100) }')
  printf '  %-48s %s-> median %s  %s\n' "$2" "$shown" "$(awk -v m=$m -v u=$4 'BEGIN { printf (u == "x" ? "%.2fx" : "%.0f%%"), (u == "x" ? m : m * 100) }')" "$([ -z "$3" ] || awk -v m=$m "BEGIN { print ($3) ? \"PASS\" : \"FAIL\" }")"
}
floor tps 'messages / table, transactions/s (>= 1.25x)' 'm >= 1.25' x
floor tpssql 'messages built in SQL / table, transactions/s' '' x
floor wal 'messages / table + prune, WAL bytes (<= 50%)' 'm <= 0.5' %
for tables in ${SLOT_TABLES:-4 100}; do
  # The floor is named at 4 tables; other counts are reported beside it.
  if [ $tables = 4 ]; then floor slots4 'one slot / 4 slots, walsender CPU (<= 40%)' 'm <= 0.4' %
  else floor slots$tables "one slot / $tables slots, walsender CPU" '' %; fi
done
