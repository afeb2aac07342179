# Schema registry: Apicurio Registry 3.x, whose /apis/ccompat/v7 API speaks the
# Confluent Schema Registry protocol (sourced by scripts/stack.sh).
#
# Storage is in-memory (the default H2 "mem" database): `stop`/`kill` + `start`
# gives an EMPTY registry. Nothing is written under the stack dir but the log.
#
# Apicurio 3.1+ is compiled for Java 21 (class files v65); Debian 12's default
# JDK is 17, so we look for a newer JDK (e.g. /usr/lib/jvm/temurin-25-jdk-amd64).
# Without one we fall back to 3.0.9, the last line that runs on Java 17.

REGISTRY_DEFAULT_VERSION=3.3.3
REGISTRY_JAVA17_VERSION=3.0.9

registry_configured_port() { printf '%s' "$REGISTRY_PORT"; }
registry_data_dir() { printf '%s/registry' "$STACK_DIR"; }
# The JVM gets -Doutbox.stack.registry=<stack dir>, so /proc cmdline identifies it.
registry_marker() { printf -- '-Doutbox.stack.registry=%s' "$STACK_DIR"; }

# Sets REGISTRY_VERSION, REGISTRY_JAVA and REGISTRY_HOME (once per run).
registry_resolve() {
  [ -n "${REGISTRY_JAVA:-}" ] && return 0
  local min=21
  if [ -n "${OUTBOX_APICURIO_VERSION:-}" ]; then
    REGISTRY_VERSION=$OUTBOX_APICURIO_VERSION
    case "$REGISTRY_VERSION" in 2.*|3.0.*) min=17 ;; esac
    REGISTRY_JAVA=$(find_java "$min" "${OUTBOX_REGISTRY_JAVA_HOME:-}") \
      || die "registry: Apicurio $REGISTRY_VERSION needs Java $min+ (set OUTBOX_REGISTRY_JAVA_HOME)"
  elif REGISTRY_JAVA=$(find_java 21 "${OUTBOX_REGISTRY_JAVA_HOME:-}"); then
    REGISTRY_VERSION=$REGISTRY_DEFAULT_VERSION
  else
    REGISTRY_VERSION=$REGISTRY_JAVA17_VERSION
    warn "registry: no Java 21+ found (Apicurio $REGISTRY_DEFAULT_VERSION needs it); falling back to Apicurio $REGISTRY_VERSION on Java 17"
    REGISTRY_JAVA=$(find_java 17 "") || die "registry: needs Java 17 or newer"
  fi
  REGISTRY_HOME="$CACHE_DIR/apicurio-registry-$REGISTRY_VERSION"
}

registry_fetch() {
  registry_resolve
  fetch_locked "apicurio-registry-$REGISTRY_VERSION" registry_fetch_unlocked
}

registry_fetch_unlocked() {
  [ -f "$REGISTRY_HOME/.complete" ] && return 0
  local tmp t0
  t0=$(now)
  say "registry: first use of Apicurio Registry $REGISTRY_VERSION: downloading io.apicurio:apicurio-registry-app:$REGISTRY_VERSION:tar.gz:all (~160 MB) from Maven Central (via ~/.m2) into $REGISTRY_HOME"
  tmp="$REGISTRY_HOME.tmp.$$"
  rm -rf "$tmp" "$tmp.dl"
  mkdir -p "$tmp" "$tmp.dl"
  # dependency:copy of the one artifact (no pom of ours): the bundle is
  # self-contained, but its pom's parents/dependencies are not all on Maven
  # Central (e.g. the 3.0.9 parent pom). copy-dependencies and the 3.x copy
  # goal give up on that; the 2.8 copy goal only warns.
  (cd "$tmp.dl" && run_mvn org.apache.maven.plugins:maven-dependency-plugin:2.8:copy \
    -Dartifact="io.apicurio:apicurio-registry-app:$REGISTRY_VERSION:tar.gz:all" -DoutputDirectory="$tmp.dl") \
    || { rm -rf "$tmp" "$tmp.dl"; die "registry: Maven could not resolve Apicurio Registry $REGISTRY_VERSION"; }
  tar -xzf "$tmp".dl/*.tar.gz -C "$tmp"
  rm -rf "$tmp.dl"
  REGISTRY_HOME=$tmp registry_jar >/dev/null || { rm -rf "$tmp"; die "registry: unexpected bundle layout (no runnable jar)"; }
  touch "$tmp/.complete"
  rm -rf "$REGISTRY_HOME"
  mv "$tmp" "$REGISTRY_HOME"
  say "registry: fetched $(du -sh "$REGISTRY_HOME" | cut -f1) in $(elapsed "$t0")s"
}

# The bundle is a Quarkus app: 3.1+ use the "fast-jar" layout (quarkus-run.jar,
# lib/, app/, quarkus/), 3.0.x the legacy one (*-runner.jar + lib/).
registry_jar() {
  local j
  for j in "$REGISTRY_HOME/quarkus-run.jar" "$REGISTRY_HOME"/*-runner.jar; do
    [ -f "$j" ] && { printf '%s' "$j"; return 0; }
  done
  return 1
}

registry_up() { registry_start; }

registry_start() {
  local dir log pid compat url
  registry_resolve
  dir=$(registry_data_dir)
  log="$STACK_DIR/logs/registry.log"
  mkdir -p "$dir/tmp" "$STACK_DIR/logs"
  require_port_free registry "$REGISTRY_PORT" REGISTRY_
  require_port_free registry-management "$REGISTRY_MGMT_PORT" REGISTRY_MGMT_

  # Global compatibility rule, applied to every subject that has no rule of
  # its own (like Confluent's default BACKWARD). Apicurio reads the
  # apicurio.rules.global.<rule-type> properties as default global rules.
  compat="${OUTBOX_REGISTRY_COMPATIBILITY:-BACKWARD}"
  local rule_opts=()
  [ "$compat" = NONE ] || rule_opts=(-Dapicurio.rules.global.compatibility="$compat")

  pid=$(cd "$dir" && spawn "$log" "$REGISTRY_JAVA" -Xms128m -Xmx512m \
    "$(registry_marker)" \
    -Djava.io.tmpdir="$dir/tmp" -Dvertx.cacheDirBase="$dir/tmp/vertx-cache" \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$REGISTRY_PORT" \
    -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$REGISTRY_MGMT_PORT" \
    -Dquarkus.otel.sdk.disabled=true \
    -Dapicurio.storage.snapshot.location="$dir/tmp" -Dapicurio.import.work-dir="$dir/tmp" \
    -Dapicurio.ccompat.max-subjects=100000 \
    -Dquarkus.oidc.tenant-enabled=false \
    "${rule_opts[@]}" \
    -jar "$(registry_jar)")
  echo "$pid" >"$(pid_file registry)"
  echo "$REGISTRY_PORT" >"$STACK_DIR/registry.port"
  url="http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7/subjects"
  wait_until 120 "$pid" curl -fsS -o /dev/null --max-time 2 "$url" || return 1
}

registry_stop() { stop_service registry 30 "${1:-}"; }

registry_destroy() { rm -rf "$(registry_data_dir)"; }
