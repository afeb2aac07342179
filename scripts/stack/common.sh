# Shared settings and helpers for scripts/stack.sh (sourced, not executed).

REPO_ROOT="$(cd "$STACK_SCRIPTS/../.." && pwd)"

# State of this checkout's stack; absolute so that pid/cmdline checks are stable.
STACK_DIR="${OUTBOX_STACK_DIR:-$REPO_ROOT/.stack}"
mkdir -p "$STACK_DIR"
STACK_DIR="$(cd "$STACK_DIR" && pwd)"

# Downloads live outside the repo so that every clone (and CI) reuses them.
CACHE_DIR="${OUTBOX_CACHE_DIR:-${HOME:-/root}/.cache/outbox-relay}"
mkdir -p "$CACHE_DIR"
CACHE_DIR="$(cd "$CACHE_DIR" && pwd)"

PG_PORT="${OUTBOX_PG_PORT:-55432}"
KAFKA_PORT="${OUTBOX_KAFKA_PORT:-59092}"
KAFKA_CONTROLLER_PORT="${OUTBOX_KAFKA_CONTROLLER_PORT:-59093}"
REGISTRY_PORT="${OUTBOX_REGISTRY_PORT:-58081}"
# Quarkus serves /q/health on a separate "management" port; pinned to loopback too.
REGISTRY_MGMT_PORT="${OUTBOX_REGISTRY_MGMT_PORT:-58082}"

say()  { printf '[stack] %s\n' "$*" >&2; }
warn() { printf '[stack] WARNING: %s\n' "$*" >&2; }
die()  { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

now() { date +%s.%N; }
# Seconds since $1 (a `now` value), one decimal.
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# svc FN SERVICE [ARGS...]: runs the service's FN (pg_up, registry_stop, ...); the four
# cluster nodes share one implementation, knode_FN NODE, and the Postgres servers of other
# majors (pgNN, the failover pair) another, epg_FN SERVICE.
svc() {
  local fn=$1 s=$2
  shift 2
  if is_cluster_node "$s"; then "knode_$fn" "$s" "$@"
  elif is_epg_service "$s"; then "epg_$fn" "$s" "$@"
  else "${s}_$fn" "$@"; fi
}

# A KRaft cluster id: 16 random bytes, URL-safe base64, as Kafka's Uuid. Never starting with "-",
# which kafka-storage's argument parser would take for an option (Kafka's own Uuid.randomUuid
# regenerates those too); about one id in 64 did, and failed a fresh stack's Kafka format.
new_cluster_id() {
  local id
  id=-
  while [ "${id:0:1}" = "-" ]; do id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '='); done
  printf '%s' "$id"
}

pid_file() { printf '%s/%s.pid' "$STACK_DIR" "$1"; }

svc_pid() { cat "$(pid_file "$1")" 2>/dev/null || true; }

# Port the service was started on (recorded at start), else the configured one.
svc_port() {
  local f="$STACK_DIR/$1.port"
  if [ -s "$f" ]; then cat "$f"; else svc configured_port "$1"; fi
}

# True when the pid file points at a live process that is really this stack's
# service: pids get reused, so the command line must contain the service's
# marker (a path inside STACK_DIR).
svc_running() {
  local pid marker
  pid=$(svc_pid "$1")
  [ -n "$pid" ] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  marker=$(svc marker "$1")
  # (args joined by spaces; the trailing space stops /x/st matching /x/st2)
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$marker "
}

# True if something accepts TCP connections on 127.0.0.1:$1.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

require_port_free() {
  local svc=$1 port=$2 i
  # Allow a few seconds for a just-killed process to release the port.
  for ((i = 0; i < 25; i++)); do
    port_open "$port" || return 0
    sleep 0.2
  done
  if port_open "$port"; then
    die "$svc: port 127.0.0.1:$port is already in use by another process ($(ss -ltnpH "sport = :$port" 2>/dev/null | grep -o 'users:.*' | head -1)); set OUTBOX_${3:-}PORT to another port"
  fi
}

pid_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

wait_pid_gone() {
  local pid=$1 timeout=$2 i
  for ((i = 0; i < timeout * 10; i++)); do
    pid_alive "$pid" || return 0
    # A killed process stays a zombie until init reaps it; that counts as gone
    # once all its threads have exited (only then are its sockets closed).
    if [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] \
       && [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" -le 1 ]; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# wait_until TIMEOUT_S PID CHECK_CMD...: polls CHECK_CMD every 0.2s; fails early
# when PID (the service) dies, or on time-out.
wait_until() {
  local timeout=$1 pid=$2 deadline
  shift 2
  deadline=$(( $(date +%s) + timeout ))
  while :; do
    "$@" >/dev/null 2>&1 && return 0
    if [ -n "$pid" ] && ! pid_alive "$pid"; then
      warn "process $pid exited during start-up"
      return 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      warn "not ready after ${timeout}s"
      return 1
    fi
    sleep 0.2
  done
}

# Gracefully stop PID with SIGTERM, escalating to SIGKILL after TIMEOUT seconds.
term_then_kill() {
  local pid=$1 timeout=$2 name=$3
  pid_alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_pid_gone "$pid" "$timeout"; then
    warn "$name: still alive ${timeout}s after SIGTERM, sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
    wait_pid_gone "$pid" 10 || true
  fi
}

# Stops a JVM service by its pid file: SIGTERM with GRACE seconds to finish (Kafka's
# controlled shutdown), or at once with "quick" (used by down, which deletes the data anyway).
stop_service() {
  local svc=$1 grace=$2 mode=${3:-} pid
  pid=$(svc_pid "$svc")
  if [ "$mode" = quick ]; then
    kill -9 "$pid" 2>/dev/null || true
    wait_pid_gone "$pid" 10 || true
  else
    term_then_kill "$pid" "$grace" "$svc"
  fi
  rm -f "$(pid_file "$svc")"
}

# Runs a detached, long-lived service: new session (no SIGHUP/SIGINT from this
# shell or CI job control), stdin closed, output appended to the log. Prints pid.
spawn() {
  local log=$1
  shift
  setsid nohup "$@" </dev/null >>"$log" 2>&1 &
  printf '%s' "$!"
}

# Byte size of a file (0 if missing): where to start reading a log for this run.
file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

# True when text $2 appears in file $1 after byte offset $3.
log_has_since() { tail -c +"$(( $3 + 1 ))" "$1" 2>/dev/null | grep -qF -- "$2"; }

# mvn with the plugin version pinned; quiet unless it fails.
MVN_DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# Its output is shown only when it fails.
run_mvn() {
  command -v mvn >/dev/null || die "mvn (Apache Maven) is needed to fetch jars from Maven Central"
  local out
  # shellcheck disable=SC2086
  if ! out=$(mvn -B -q -Dstyle.color=never ${OUTBOX_MVN_ARGS:-} "$@" 2>&1); then
    printf '%s\n' "$out" >&2
    return 1
  fi
}

# Major version of a java binary (17, 21, 25, ...), empty if it does not run.
java_major() {
  "$1" -XshowSettings:properties -version 2>&1 \
    | awk -F'= ' '/java.specification.version/ { print $2; exit }' | cut -d. -f1
}

# The java to use for a service needing at least Java $1: the JDK at $2 (an
# explicit *_JAVA_HOME override) if given, else the first acceptable one of
# JAVA_HOME, java on PATH, and the JDKs under /usr/lib/jvm (newest first).
find_java() {
  local min=$1 override=${2:-} cand m
  if [ -n "$override" ]; then
    [ -x "$override/bin/java" ] || die "no java at $override/bin/java"
    printf '%s' "$override/bin/java"
    return
  fi
  for cand in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java || true)" \
              $(ls -d /usr/lib/jvm/*/bin/java 2>/dev/null | sort -rV); do
    [ -n "$cand" ] && [ -x "$cand" ] || continue
    m=$(java_major "$cand")
    if [ -n "$m" ] && [ "$m" -ge "$min" ]; then
      printf '%s' "$cand"
      return
    fi
  done
  return 1
}

env_lines() {
  printf 'DATABASE_URL=postgres://postgres@127.0.0.1:%s/outbox\n' "$(svc_port pg)"
  printf 'KAFKA_BROKERS=127.0.0.1:%s\n' "$(svc_port kafka)"
  printf 'SCHEMA_REGISTRY_URL=http://127.0.0.1:%s/apis/ccompat/v7\n' "$(svc_port registry)"
  printf 'KAFKA_CLUSTER_BROKERS=%s\n' "$(cluster_brokers)"
  printf 'OUTBOX_STACK_DIR=%s\n' "$STACK_DIR"
}

write_env_file() {
  env_lines > "$STACK_DIR/env.tmp"
  mv "$STACK_DIR/env.tmp" "$STACK_DIR/env"
}

# fetch_locked NAME FN [ARGS...]: runs FN ARGS under an exclusive lock in the cache dir, so
# two concurrent `up`s (or clones) never download into the same place at once.
fetch_locked() {
  local name=$1 fn=$2
  shift 2
  (
    flock 9
    "$fn" "$@"
  ) 9>"$CACHE_DIR/.$name.lock"
}
