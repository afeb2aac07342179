# Kafka: one KRaft node in combined mode (broker + controller in one JVM)
# (sourced by scripts/stack.sh).
#
# There is no Kafka distribution tarball on Maven Central, but the broker is an
# ordinary set of jars: stack/kafka/pom.xml lists them and Maven copies them
# (with their runtime dependencies) into the cache, then we run kafka.Kafka
# the way bin/kafka-server-start.sh would.

KAFKA_VERSION="${OUTBOX_KAFKA_VERSION:-4.4.0}"
KAFKA_HOME="$CACHE_DIR/kafka-$KAFKA_VERSION"

kafka_configured_port() { printf '%s' "$KAFKA_PORT"; }
kafka_dir() { printf '%s/kafka' "$STACK_DIR"; }
kafka_data_dir() { printf '%s/data' "$(kafka_dir)"; }
kafka_marker() { printf '%s/server.properties' "$(kafka_dir)"; }

# Kafka 4.x brokers need Java 17+.
kafka_java() {
  find_java 17 "${OUTBOX_KAFKA_JAVA_HOME:-}" || die "kafka: needs Java 17 or newer (set OUTBOX_KAFKA_JAVA_HOME)"
}

kafka_fetch() { fetch_locked "kafka-$KAFKA_VERSION" kafka_fetch_unlocked; }

kafka_fetch_unlocked() {
  [ -f "$KAFKA_HOME/.complete" ] && return 0
  local tmp t0
  t0=$(now)
  say "kafka: first use of Kafka $KAFKA_VERSION: downloading org.apache.kafka:kafka_2.13:$KAFKA_VERSION + kafka-tools + log4j2 and their dependencies from Maven Central (via ~/.m2) into $KAFKA_HOME/libs"
  tmp="$KAFKA_HOME.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp/libs"
  run_mvn -f "$REPO_ROOT/stack/kafka/pom.xml" "$MVN_DEP_PLUGIN:copy-dependencies" \
    -Dkafka.version="$KAFKA_VERSION" -DincludeScope=runtime -DoutputDirectory="$tmp/libs" \
    || { rm -rf "$tmp"; die "kafka: Maven could not resolve Kafka $KAFKA_VERSION"; }
  touch "$tmp/.complete"
  rm -rf "$KAFKA_HOME"
  mv "$tmp" "$KAFKA_HOME"
  say "kafka: fetched $(ls "$KAFKA_HOME/libs" | wc -l) jars, $(du -sh "$KAFKA_HOME/libs" | cut -f1), in $(elapsed "$t0")s"
}

# log4j2 configs in $1: log4j2.properties for a server (console, chatty loggers turned
# down), log4j2-tools.properties for the command-line tools (warnings only, to stderr).
# Broker settings of a single-node test cluster (the plain and the secured broker share them).
kafka_single_node_settings() {
  cat <<SETTINGS
# Single node: every internal topic has one replica.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
min.insync.replicas=1
default.replication.factor=1
# OUTBOX_KAFKA_AUTO_CREATE=false: a broker that creates no topic, as managed services run them
# (the test of that case starts one of its own).
auto.create.topics.enable=${OUTBOX_KAFKA_AUTO_CREATE:-true}
num.partitions=3
# Consumers in tests should get their partitions immediately.
group.initial.rebalance.delay.ms=0
# After kill -9, the restarted broker cannot register until the controller
# expires the old incarnation's session (default 9 s). Shorter = faster
# fault-injection restarts; still far above any GC pause of a 512 MB heap.
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=1000
SETTINGS
}

kafka_write_log_configs() {
  # Kafka 4 logs via SLF4J -> log4j2. One console appender whose output the
  # launcher appends to logs/kafka.log (a single writer), with the chatty
  # per-partition and config-dump loggers turned down.
  cat >"$1/log4j2.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = STDOUT
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.partition.name = kafka.cluster
logger.partition.level = WARN
logger.coordinator.name = kafka.coordinator
logger.coordinator.level = WARN
logger.coordinator2.name = org.apache.kafka.coordinator
logger.coordinator2.level = WARN
# Except the markers' sender: it says at INFO when it skips a transaction's markers to a
# partition whose leader it cannot find (the hanging transaction of docs/delivery-modes.md).
logger.markers.name = kafka.coordinator.transaction.TransactionMarkerChannelManager
logger.markers.level = INFO
logger.markers2.name = org.apache.kafka.coordinator.transaction.TransactionMarkerChannelManager
logger.markers2.level = INFO
logger.storage.name = org.apache.kafka.storage
logger.storage.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = WARN
logger.image.name = org.apache.kafka.image
logger.image.level = WARN
logger.metadata.name = org.apache.kafka.metadata
logger.metadata.level = WARN
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
logger.logmanager.name = kafka.log
logger.logmanager.level = WARN
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = WARN
EOF

  # Tools (format, topic listing) only log warnings, to stderr.
  cat >"$1/log4j2-tools.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = STDERR
EOF
}

# First start: config files and storage format (KRaft needs a formatted log dir
# with a cluster id before the first start).
kafka_init() {
  local dir data cluster_id log java
  dir=$(kafka_dir)
  data=$(kafka_data_dir)
  log="$STACK_DIR/logs/kafka.log"
  java=$(kafka_java)
  rm -rf "$dir"
  mkdir -p "$dir" "$data"

  cat >"$dir/server.properties" <<EOF
# outbox-relay stack: single KRaft node, broker + controller, loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$data
$(kafka_single_node_settings)
EOF

  kafka_write_log_configs "$dir"

  # A KRaft cluster id is 16 random bytes, base64url without padding.
  cluster_id=$(new_cluster_id)
  echo "$cluster_id" >"$dir/cluster.id"
  say "kafka: formatting storage in $data (cluster id $cluster_id)"
  "$java" -Dlog4j2.configurationFile="$dir/log4j2-tools.properties" -cp "$KAFKA_HOME/libs/*" \
    kafka.tools.StorageTool format --standalone -t "$cluster_id" -c "$dir/server.properties" >>"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; die "kafka: storage format failed"; }
}

kafka_up() {
  [ -f "$(kafka_data_dir)/meta.properties" ] || kafka_init
  kafka_start
}

kafka_start() {
  local dir
  dir=$(kafka_dir)
  [ -f "$(kafka_data_dir)/meta.properties" ] || die "kafka: no formatted storage in $(kafka_data_dir) (run: scripts/stack.sh up kafka)"
  # Listener ports are fixed at format time (the controller's address is part
  # of the KRaft voter set), so take them from the config actually in use.
  local port cport
  port=$(sed -n 's#^advertised.listeners=PLAINTEXT://127.0.0.1:##p' "$dir/server.properties")
  cport=$(sed -n 's#^controller.quorum.bootstrap.servers=127.0.0.1:##p' "$dir/server.properties")
  [ "$port" = "$KAFKA_PORT" ] || warn "kafka: data was created for port $port (OUTBOX_KAFKA_PORT=$KAFKA_PORT ignored; run down kafka to change it)"
  require_port_free kafka "$port" KAFKA_
  require_port_free kafka-controller "$cport" KAFKA_CONTROLLER_
  kafka_launch kafka "$dir" "$port"
}

# kafka_launch SERVICE DIR PORT: runs kafka.Kafka on DIR/server.properties, logging to
# logs/SERVICE.log, records the pid, and waits until it serves (a broker: until it answers
# a metadata request on PORT; a controller, PORT empty: until it says it started).
kafka_launch() {
  local svc=$1 dir=$2 port=$3 log java pid offset
  log="$STACK_DIR/logs/$svc.log"
  java=$(kafka_java)
  mkdir -p "$STACK_DIR/logs"
  offset=$(file_size "$log")
  # JVM flags as in Kafka's bin/kafka-run-class.sh, with a small heap, and (unless
  # OUTBOX_KAFKA_FULL_JIT=true) the quick compiler only: a broker's start costs ~4 s of CPU
  # instead of ~7, and the fault tests restart brokers on two busy cores, where a start took
  # 27-36 s with both compilers. The test brokers never run long enough for the optimizing
  # compiler to pay; the benches keep it (bench/lib/stack.ts).
  local jit=-XX:TieredStopAtLevel=1
  if [ "${OUTBOX_KAFKA_FULL_JIT:-false}" = true ]; then jit=-XX:+TieredCompilation; fi
  pid=$(spawn "$log" "$java" -Xms256m -Xmx512m -server \
    "$jit" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" -Dkafka.logs.dir="$STACK_DIR/logs" \
    -cp "$KAFKA_HOME/libs/*" kafka.Kafka "$dir/server.properties")
  echo "$pid" >"$(pid_file "$svc")"
  [ -z "$port" ] || echo "$port" >"$STACK_DIR/$svc.port"
  # Ready = the server says it started (fresh lines of the log only): a KRaft broker says so
  # only once the controller has unfenced it and its listeners take requests. For a broker,
  # its port takes a connection too. (Not a topic listing through the admin tools: that is a
  # second JVM, 1 s on an idle machine and ~4 s of every broker restart under the fault tests' load.)
  wait_until 120 "$pid" log_has_since "$log" "Kafka Server started" "$offset" || return 1
  [ -n "$port" ] || return 0
  wait_until 60 "$pid" port_open "$port" || return 1
}

# Graceful: SIGTERM runs Kafka's controlled shutdown (flushes logs, writes the
# clean-shutdown marker). "quick" (used by down) just kills it.
kafka_stop() { stop_service kafka 60 "${1:-}"; }

kafka_destroy() { rm -rf "$(kafka_dir)"; }
