# Kafka cluster for fault tests: one KRaft controller and three brokers, from the
# same jars as the single node (sourced by scripts/stack.sh; services `controller`,
# `broker1`..`broker3`, all four as `cluster`).
#
# Three brokers is the smallest cluster where a leader can move and a write can
# still reach min.insync.replicas=2 of replication factor 3: what a production
# topic looks like, and what a broker kill, a rolling restart or two brokers down
# exercise. The controller runs on its own so that brokers can be killed without
# losing the metadata quorum; it is not a fault target here.

CLUSTER_NODES=(controller broker1 broker2 broker3)
# controller on the base port, broker N on base + N.
CLUSTER_PORT_BASE="${OUTBOX_KAFKA_CLUSTER_PORT:-59190}"
CONTROLLER_NODE_ID=100

is_cluster_node() {
  case "$1" in controller|broker[123]) return 0 ;; *) return 1 ;; esac
}

cluster_dir() { printf '%s/cluster' "$STACK_DIR"; }

# Port of a node: the controller's listener, or a broker's client listener.
knode_configured_port() {
  if [ "$1" = controller ]; then printf '%s' "$CLUSTER_PORT_BASE"; else printf '%s' $((CLUSTER_PORT_BASE + ${1#broker})); fi
}

knode_dir() { printf '%s/%s' "$(cluster_dir)" "$1"; }
knode_data_dir() { printf '%s/data' "$(knode_dir "$1")"; }
knode_marker() { printf '%s/server.properties' "$(knode_dir "$1")"; }

cluster_brokers() {
  local n list=""
  for n in 1 2 3; do list+="${list:+,}127.0.0.1:$(knode_configured_port "broker$n")"; done
  printf '%s' "$list"
}

knode_fetch() { kafka_fetch; }

# Writes a node's server.properties; the voter set is static (one controller).
knode_write_config() {
  local node=$1 dir
  dir=$(knode_dir "$node")
  mkdir -p "$dir" "$(knode_data_dir "$node")"
  kafka_write_log_configs "$dir"
  {
    printf '# outbox-relay stack: cluster node %s, loopback only.\n' "$node"
    printf 'controller.quorum.voters=%s@127.0.0.1:%s\n' "$CONTROLLER_NODE_ID" "$CLUSTER_PORT_BASE"
    printf 'controller.listener.names=CONTROLLER\n'
    printf 'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n'
    printf 'log.dirs=%s\n' "$(knode_data_dir "$node")"
    if [ "$node" = controller ]; then
      printf 'process.roles=controller\nnode.id=%s\n' "$CONTROLLER_NODE_ID"
      printf 'listeners=CONTROLLER://127.0.0.1:%s\n' "$CLUSTER_PORT_BASE"
    else
      local port
      port=$(knode_configured_port "$node")
      printf 'process.roles=broker\nnode.id=%s\n' "${node#broker}"
      printf 'listeners=PLAINTEXT://127.0.0.1:%s\nadvertised.listeners=PLAINTEXT://127.0.0.1:%s\n' "$port" "$port"
      printf 'inter.broker.listener.name=PLAINTEXT\n'
    fi
    cat <<'EOF'
# What the relay asks of production topics for no loss: three replicas, two in
# sync for a write, and never an out-of-sync replica as leader.
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
auto.create.topics.enable=true
num.partitions=6
group.initial.rebalance.delay.ms=0
# A killed broker is fenced (and its partitions get new leaders) after 4 s, as
# on the single node; a follower that stops fetching leaves the ISR after 10 s.
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=1000
replica.lag.time.max.ms=10000
EOF
  } >"$dir/server.properties"
}

# First start of any node formats all four with one cluster id.
cluster_init() {
  local node java cluster_id log
  java=$(kafka_java)
  log="$STACK_DIR/logs/cluster-format.log"
  rm -rf "$(cluster_dir)"
  mkdir -p "$(cluster_dir)" "$STACK_DIR/logs"
  cluster_id=$(new_cluster_id)
  echo "$cluster_id" >"$(cluster_dir)/cluster.id"
  say "cluster: formatting a controller and three brokers (cluster id $cluster_id)"
  for node in "${CLUSTER_NODES[@]}"; do
    knode_write_config "$node"
    "$java" -Dlog4j2.configurationFile="$(knode_dir "$node")/log4j2-tools.properties" -cp "$KAFKA_HOME/libs/*" \
      kafka.tools.StorageTool format -t "$cluster_id" -c "$(knode_marker "$node")" >>"$log" 2>&1 \
      || { tail -n 20 "$log" >&2; die "cluster: storage format of $node failed"; }
  done
}

knode_up() {
  [ -f "$(knode_data_dir "$1")/meta.properties" ] || cluster_init
  knode_start "$1"
}

knode_start() {
  local node=$1 port
  [ -f "$(knode_data_dir "$node")/meta.properties" ] || die "$node: no formatted storage (run: scripts/stack.sh up cluster)"
  port=$(knode_configured_port "$node")
  require_port_free "$node" "$port" KAFKA_CLUSTER_
  if [ "$node" = controller ]; then
    kafka_launch "$node" "$(knode_dir "$node")" ""
    echo "$port" >"$STACK_DIR/$node.port"
  else
    kafka_launch "$node" "$(knode_dir "$node")" "$port"
  fi
}

knode_stop() { stop_service "$1" 60 "${2:-}"; }

knode_destroy() {
  rm -rf "$(knode_dir "$1")"
  # The last node gone takes the shared cluster id with it.
  [ -n "$(ls -d "$(cluster_dir)"/*/ 2>/dev/null)" ] || rm -rf "$(cluster_dir)"
}
