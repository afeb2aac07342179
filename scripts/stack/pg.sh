# PostgreSQL: a throwaway cluster owned by the harness (sourced by scripts/stack.sh).
#
# The Debian packages provide the binaries only; the cluster is created with
# initdb under the stack dir and run directly (not via pg_ctlcluster), so it is
# independent of the system cluster on port 5432.

PG_BIN="${OUTBOX_PG_BIN:-/usr/lib/postgresql/15/bin}"

pg_configured_port() { printf '%s' "$PG_PORT"; }

# Short, stable id of this stack dir, for names that must not clash between clones.
stack_hash() { printf '%s' "$STACK_DIR" | md5sum | cut -c1-10; }

# Postgres refuses to run as root, so as root we run it as the `postgres` OS
# user. setpriv execs in place (unlike runuser/su, which fork), so the pid we
# record is the postmaster itself and `kill -9` hits the postmaster.
if [ "$(id -u)" -eq 0 ]; then
  PG_AS=(setpriv --reuid=postgres --regid=postgres --init-groups --reset-env --)
else
  PG_AS=()
fi
# (from /, which the postgres user can always read, unlike e.g. /root)
as_pg() { (cd / && "${PG_AS[@]}" "$@"); }

# Where the cluster lives: $STACK_DIR/pg, unless the postgres user cannot reach
# it (e.g. a repo under a 0700 home dir); then a per-stack dir under /tmp.
pg_base() {
  if [ "$(id -u)" -ne 0 ] || as_pg test -x "$STACK_DIR" 2>/dev/null; then
    printf '%s/pg' "$STACK_DIR"
  else
    printf '/tmp/outbox-relay-%s/pg' "$(stack_hash)"
  fi
}

pg_data_dir() { printf '%s/data' "$(pg_base)"; }

# Unix socket dir: inside the stack (not /var/run/postgresql, which belongs to
# the system cluster). Socket paths are limited to ~107 bytes, so fall back to
# /tmp for deep checkouts.
pg_socket_dir() { short_socket_dir "$(pg_base)/run" "/tmp/outbox-relay-$(stack_hash)/pg-run"; }

# DIR, or FALLBACK when DIR is too long for a socket path (~107 bytes with the file name).
short_socket_dir() {
  if [ "${#1}" -gt 80 ]; then printf '%s' "$2"; else printf '%s' "$1"; fi
}

# Identifies our postmaster in /proc/PID/cmdline (it runs as `postgres -D DATA`).
pg_marker() { pg_data_dir; }

# Shown in `ps` as "postgres: NAME: ...", which lets us find leftover backends.
pg_cluster_name() { printf 'outbox-stack-%s' "$(stack_hash)"; }

pg_fetch() {
  if [ -x "$PG_BIN/postgres" ] && [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_isready" ]; then
    return 0
  fi
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    say "pg: PostgreSQL 15 binaries not found in $PG_BIN; installing Debian package postgresql-15"
    apt-get install -y --no-install-recommends postgresql-15 >&2 \
      || { apt-get update >&2 && apt-get install -y --no-install-recommends postgresql-15 >&2; } \
      || die "pg: could not install postgresql-15"
  else
    die "pg: PostgreSQL 15 binaries not found in $PG_BIN (install postgresql-15, or set OUTBOX_PG_BIN)"
  fi
}

# First start: create the cluster and its config.
pg_init() {
  local base data log
  base=$(pg_base)
  data=$(pg_data_dir)
  log="$STACK_DIR/logs/pg.log"
  say "pg: initdb in $data"
  [ "$base" = "$STACK_DIR/pg" ] || say "pg: note: $STACK_DIR is not traversable by the postgres user, so the cluster lives in $base"
  rm -rf "$data"
  mkdir -p "$base" "$(pg_socket_dir)"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$base" "$(pg_socket_dir)"; fi
  as_pg "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale >>"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; die "pg: initdb failed"; }

  # Everything the relay and its tests need: logical decoding, room for many
  # slots/walsenders/connections (parallel tests), loopback only.
  cat >>"$data/postgresql.conf" <<EOF

# --- outbox-relay stack (scripts/stack/pg.sh) ---
cluster_name = '$(pg_cluster_name)'
listen_addresses = '127.0.0.1'
unix_socket_directories = '$(pg_socket_dir)'
wal_level = logical
# The bench holds a slot per contender and round (drains of the same load): with --compression, about 40.
max_replication_slots = 64
max_wal_senders = 20
max_connections = 200
wal_sender_timeout = 60s
# Throwaway cluster: fsync only matters for OS crashes, not for kill -9 of the
# server (which the fault-injection tests do), so skip it for speed, unless a
# benchmark wants commits to cost what they do on a real disk (OUTBOX_PG_FSYNC=on:
# npm run bench's default; it also sets fsync for its run on a cluster made before).
fsync = ${OUTBOX_PG_FSYNC:-off}
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
log_min_messages = warning
log_connections = off
EOF
  # Port is given on the command line (so OUTBOX_PG_PORT can change between runs).
  pg_write_trust_hba "$data"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$data/postgresql.conf" "$data/pg_hba.conf"; fi
}

# pg_hba.conf of a throwaway cluster in DATA: trust on loopback only, replication included.
pg_write_trust_hba() {
  cat >"$1/pg_hba.conf" <<'EOF'
# outbox-relay stack: trust on loopback only, including replication connections.
local   all          all                 trust
local   replication  all                 trust
host    all          all    127.0.0.1/32 trust
host    replication  all    127.0.0.1/32 trust
EOF
}

pg_up() {
  pg_fetch
  [ -f "$(pg_data_dir)/PG_VERSION" ] || pg_init
  pg_start
}

pg_start() {
  local data log pid offset
  data=$(pg_data_dir)
  log="$STACK_DIR/logs/pg.log"
  [ -f "$data/PG_VERSION" ] || die "pg: no cluster in $data (run: scripts/stack.sh up pg)"
  mkdir -p "$STACK_DIR/logs" "$(pg_socket_dir)"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$(pg_socket_dir)"; fi
  require_port_free pg "$PG_PORT" PG_

  pg_wait_postmaster_gone "$(pg_cluster_name)" "$data"
  offset=$(file_size "$log")
  pid=$(cd / && spawn "$log" "${PG_AS[@]}" "$PG_BIN/postgres" -D "$data" -p "$PG_PORT" -k "$(pg_socket_dir)")
  echo "$pid" >"$(pid_file pg)"
  echo "$PG_PORT" >"$STACK_DIR/pg.port"
  if ! wait_until 120 "$pid" "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres; then
    return 1
  fi
  if log_has_since "$log" "database system was interrupted" "$offset" \
     || log_has_since "$log" "not properly shut down" "$offset"; then
    say "pg: recovered from an unclean shutdown"
  fi
  pg_ensure_db outbox
}

# pg_ensure_db DB [PORT SERVICE]: on the plain cluster, or on another of the stack's servers.
pg_ensure_db() {
  local db=$1 port=${2:-$PG_PORT} service=${3:-pg}
  if [ "$("$PG_BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -XtAc \
          "select 1 from pg_database where datname = '$db'")" != 1 ]; then
    "$PG_BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -Xq \
      -c "create database \"$db\" owner postgres" >/dev/null
    say "$service: created database $db"
  fi
}

# Graceful: SIGINT is Postgres' "fast" shutdown (disconnect clients, checkpoint).
# With "quick" (used by down, whose data is deleted anyway) it is SIGQUIT (immediate).
pg_stop() {
  postgres_stop pg "${1:-}"
}

# postgres_stop SERVICE [quick]: any of the stack's Postgres servers.
postgres_stop() {
  local service=$1 pid
  pid=$(svc_pid "$service")
  shift
  if [ "${1:-}" = quick ]; then
    kill -QUIT "$pid" 2>/dev/null || true
    wait_pid_gone "$pid" 10 || kill -9 "$pid" 2>/dev/null || true
  else
    kill -INT "$pid" 2>/dev/null || true
    if ! wait_pid_gone "$pid" 60; then
      warn "$service: fast shutdown took over 60s, using immediate shutdown"
      kill -QUIT "$pid" 2>/dev/null || true
      wait_pid_gone "$pid" 10 || kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$(pid_file "$service")"
}

# Before starting a postmaster on DATA (cluster_name NAME): after `kill -9` of the old one
# its backends notice and exit on their own, but a new postmaster refuses to start while
# they still hold shared memory. Also, the killed postmaster lingers as a zombie until init
# reaps it, and Postgres takes a zombie pid in postmaster.pid for a live postmaster.
pg_wait_postmaster_gone() {
  local name=$1 data=$2 i old_pid
  old_pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
  for ((i = 0; i < 150; i++)); do
    if ! pgrep -f "^postgres: $name: " >/dev/null \
       && ! { [ -n "$old_pid" ] && [ "$(awk '{print $3}' "/proc/$old_pid/stat" 2>/dev/null)" = Z ]; }; then
      return 0
    fi
    sleep 0.1
  done
}

pg_destroy() {
  local base
  base=$(pg_base)
  rm -rf "$base"
  # The /tmp fallbacks (not traversable stack dir / long socket path).
  rm -rf "/tmp/outbox-relay-$(stack_hash)"
}
