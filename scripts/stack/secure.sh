# The secure stack (issue 14): the same three kinds of service as the plain stack, but
# only reachable over TLS and with authentication, for the tests of the relay's production
# connectivity (sourced by scripts/stack.sh; services `secure_kafka`, `secure_pg`,
# `secure_registry`, all three as `secure`; not started by default).
#
#   tls              $STACK_DIR/tls: a test CA and PEM certificates, made once per stack dir
#                    with openssl (tls.sh)
#   secure_kafka     one KRaft node (the jars of kafka.sh) with ACLs enforced: SASL_SSL
#                    (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN, OAUTHBEARER with Kafka's unsecured
#                    JWS validator), SSL with required client certificates (mTLS), and the
#                    broker's own internal and controller listeners, mTLS too
#   secure_pg        a second Postgres 15 cluster (the binaries of pg.sh): ssl=on, only
#                    `hostssl` lines, client-certificate (`cert`) or scram-sha-256 auth
#   secure_registry  a second Apicurio Registry (the bundle of registry.sh): HTTPS only,
#                    HTTP basic auth against Quarkus' embedded users, role-based authorization
#
# Nothing here is a secret: the passwords below are fixed test values, printed by
# `scripts/stack.sh env`, for services that listen on 127.0.0.1 only.

# shellcheck source=scripts/stack/tls.sh
source "$STACK_SCRIPTS/tls.sh"

SECURE_SERVICES=(secure_kafka secure_pg secure_registry)

SECURE_KAFKA_SASL_PORT="${OUTBOX_SECURE_KAFKA_SASL_PORT:-59501}"
SECURE_KAFKA_MTLS_PORT="${OUTBOX_SECURE_KAFKA_MTLS_PORT:-59502}"
SECURE_KAFKA_INTERNAL_PORT="${OUTBOX_SECURE_KAFKA_INTERNAL_PORT:-59503}"
SECURE_KAFKA_CONTROLLER_PORT="${OUTBOX_SECURE_KAFKA_CONTROLLER_PORT:-59504}"
SECURE_PG_PORT="${OUTBOX_SECURE_PG_PORT:-59505}"
SECURE_REGISTRY_PORT="${OUTBOX_SECURE_REGISTRY_PORT:-59506}"
SECURE_REGISTRY_MGMT_PORT="${OUTBOX_SECURE_REGISTRY_MGMT_PORT:-59507}"

# Kafka: `admin` is the only super user besides the broker itself (its certificate's CN);
# `relay` may do only what the tests grant it with ACLs. Both exist for SCRAM-SHA-512,
# SCRAM-SHA-256 and PLAIN; OAUTHBEARER takes the token's `sub` as the user name.
SECURE_KAFKA_ADMIN_USER=admin
SECURE_KAFKA_ADMIN_PASSWORD=admin-secret
SECURE_KAFKA_USER=relay
SECURE_KAFKA_PASSWORD=relay-secret
SECURE_KAFKA_BROKER_PRINCIPAL=$TLS_BROKER_CN
# Postgres: `relay` logs in with a password, `relay_cert` with the client certificate
# (CN=relay_cert); both may replicate. `postgres` is the superuser (password over TLS,
# trust on the stack's own Unix socket, which the script uses).
SECURE_PG_ADMIN_PASSWORD=postgres-secret
SECURE_PG_USER=relay
SECURE_PG_PASSWORD=relay-secret
SECURE_PG_CERT_USER=$TLS_CLIENT_CN
# Registry: `relay` may register schemas (sr-developer), `reader` may only read (sr-readonly).
SECURE_REGISTRY_USER=relay
SECURE_REGISTRY_PASSWORD=relay-registry-secret
SECURE_REGISTRY_READER=reader
SECURE_REGISTRY_READER_PASSWORD=reader-registry-secret

is_secure_service() {
  case "$1" in secure_kafka|secure_pg|secure_registry) return 0 ;; *) return 1 ;; esac
}

secure_dir() { printf '%s/secure' "$STACK_DIR"; }

# The last service gone takes the secure dir with it (then `status` no longer lists them).
# The certificates in $STACK_DIR/tls stay: they are made once per stack dir.
secure_dir_cleanup() { rmdir "$(secure_dir)" 2>/dev/null || true; }

# ---------------------------------------------------------------------------------------
# Kafka

secure_kafka_configured_port() { printf '%s' "$SECURE_KAFKA_SASL_PORT"; }
secure_kafka_dir() { printf '%s/kafka' "$(secure_dir)"; }
secure_kafka_data_dir() { printf '%s/data' "$(secure_kafka_dir)"; }
secure_kafka_marker() { printf '%s/server.properties' "$(secure_kafka_dir)"; }
secure_kafka_admin_config() { printf '%s/admin-client.properties' "$(secure_kafka_dir)"; }

secure_kafka_fetch() { kafka_fetch; }

secure_kafka_init() {
  local dir data log java cluster_id tls
  dir=$(secure_kafka_dir)
  data=$(secure_kafka_data_dir)
  tls=$(tls_dir)
  log="$STACK_DIR/logs/secure_kafka.log"
  java=$(kafka_java)
  rm -rf "$dir"
  mkdir -p "$dir" "$data"

  local plain_users="user_$SECURE_KAFKA_ADMIN_USER=\"$SECURE_KAFKA_ADMIN_PASSWORD\" user_$SECURE_KAFKA_USER=\"$SECURE_KAFKA_PASSWORD\""
  cat >"$dir/server.properties" <<EOF
# outbox-relay secure stack: single KRaft node, TLS everywhere, ACLs enforced, loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$SECURE_KAFKA_CONTROLLER_PORT
# SASL_SSL and MTLS are for clients; INTERNAL (the broker's own requests) and CONTROLLER
# take only the broker's certificate in practice (mTLS; anything else has no ACLs).
listeners=SASL_SSL://127.0.0.1:$SECURE_KAFKA_SASL_PORT,MTLS://127.0.0.1:$SECURE_KAFKA_MTLS_PORT,INTERNAL://127.0.0.1:$SECURE_KAFKA_INTERNAL_PORT,CONTROLLER://127.0.0.1:$SECURE_KAFKA_CONTROLLER_PORT
advertised.listeners=SASL_SSL://127.0.0.1:$SECURE_KAFKA_SASL_PORT,MTLS://127.0.0.1:$SECURE_KAFKA_MTLS_PORT,INTERNAL://127.0.0.1:$SECURE_KAFKA_INTERNAL_PORT
listener.security.protocol.map=SASL_SSL:SASL_SSL,MTLS:SSL,INTERNAL:SSL,CONTROLLER:SSL
controller.listener.names=CONTROLLER
inter.broker.listener.name=INTERNAL
log.dirs=$data

# TLS: PEM files straight from $tls (no JKS). The key file holds an unencrypted PKCS#8
# key followed by the certificate chain, so no ssl.key.password.
ssl.keystore.type=PEM
ssl.keystore.location=$tls/kafka-broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.crt
ssl.endpoint.identification.algorithm=https
listener.name.mtls.ssl.client.auth=required
listener.name.internal.ssl.client.auth=required
listener.name.controller.ssl.client.auth=required
# A certificate's principal is its CN (User:$TLS_CLIENT_CN, User:$SECURE_KAFKA_BROKER_PRINCIPAL), not the whole DN.
ssl.principal.mapping.rules=RULE:^CN=([^,]+)\$/\$1/,DEFAULT

# SASL on the SASL_SSL listener. SCRAM credentials are in the metadata log (created at
# format time), PLAIN users in the JAAS config. OAUTHBEARER: no callback handler is
# configured, so the broker validates tokens with Kafka's built-in
# OAuthBearerUnsecuredValidatorCallbackHandler (unsigned JWS, alg "none"; the principal is
# the "sub" claim; "exp" is required). Test-only: it accepts any token a client makes up.
sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required $plain_users;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="$SECURE_KAFKA_BROKER_PRINCIPAL" unsecuredValidatorAllowableClockSkewMs="5000";

# ACLs: nothing is allowed without one, except to the super users.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:$SECURE_KAFKA_ADMIN_USER;User:$SECURE_KAFKA_BROKER_PRINCIPAL

$(kafka_single_node_settings)
EOF
  kafka_write_log_configs "$dir"
  # Authorization decisions are logged by kafka.authorizer.logger: denials at INFO, which
  # is what one wants to see when a test gets an authorization error.
  printf 'logger.authorizer.name = kafka.authorizer.logger\nlogger.authorizer.level = INFO\n' >>"$dir/log4j2.properties"

  # For the command-line tools (readiness check; by hand: kafka-acls, kafka-topics).
  cat >"$(secure_kafka_admin_config)" <<EOF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$SECURE_KAFKA_ADMIN_USER" password="$SECURE_KAFKA_ADMIN_PASSWORD";
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.crt
EOF

  cluster_id=$(new_cluster_id)
  echo "$cluster_id" >"$dir/cluster.id"
  local scram=() user pass mech
  for user in "$SECURE_KAFKA_ADMIN_USER:$SECURE_KAFKA_ADMIN_PASSWORD" "$SECURE_KAFKA_USER:$SECURE_KAFKA_PASSWORD"; do
    pass=${user#*:}
    user=${user%%:*}
    for mech in SCRAM-SHA-512 SCRAM-SHA-256; do
      scram+=(--add-scram "$mech=[name=$user,password=$pass]")
    done
  done
  say "secure_kafka: formatting storage in $data (cluster id $cluster_id, SCRAM users $SECURE_KAFKA_ADMIN_USER and $SECURE_KAFKA_USER)"
  "$java" -Dlog4j2.configurationFile="$dir/log4j2-tools.properties" -cp "$KAFKA_HOME/libs/*" \
    kafka.tools.StorageTool format --standalone -t "$cluster_id" -c "$dir/server.properties" "${scram[@]}" >>"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; die "secure_kafka: storage format failed"; }
}

secure_kafka_up() {
  tls_ensure
  [ -f "$(secure_kafka_data_dir)/meta.properties" ] || secure_kafka_init
  secure_kafka_start
}

secure_kafka_start() {
  local dir java pid
  dir=$(secure_kafka_dir)
  [ -f "$(secure_kafka_data_dir)/meta.properties" ] || die "secure_kafka: no formatted storage (run: scripts/stack.sh up secure)"
  grep -qF "SASL_SSL://127.0.0.1:$SECURE_KAFKA_SASL_PORT," "$dir/server.properties" \
    || warn "secure_kafka: the data was created for other ports (run down secure to change them); using those of $dir/server.properties"
  local port name
  for port in $(sed -n 's#^listeners=##p' "$dir/server.properties" | tr ',' '\n' | sed 's#.*://127.0.0.1:##'); do
    name=$(sed -n 's#^listeners=##p' "$dir/server.properties" | tr ',' '\n' | grep ":$port\$" | cut -d: -f1)
    require_port_free "secure_kafka ($name listener)" "$port" SECURE_KAFKA_
  done
  tls_ensure
  # Started as a controller would be (ready when it logs that it started), then checked
  # like a client would: an admin listing topics over SASL_SSL with SCRAM-SHA-512.
  kafka_launch secure_kafka "$dir" "" || return 1
  port=$(sed -n 's#^advertised.listeners=SASL_SSL://127.0.0.1:\([0-9]*\),.*#\1#p' "$dir/server.properties")
  echo "$port" >"$STACK_DIR/secure_kafka.port"
  java=$(kafka_java)
  pid=$(svc_pid secure_kafka)
  wait_until 60 "$pid" "$java" -Dlog4j2.configurationFile="$dir/log4j2-tools.properties" \
    -cp "$KAFKA_HOME/libs/*" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "127.0.0.1:$port" --command-config "$(secure_kafka_admin_config)" --list || return 1
}

secure_kafka_stop() { stop_service secure_kafka 60 "${1:-}"; }

secure_kafka_destroy() { rm -rf "$(secure_kafka_dir)"; secure_dir_cleanup; }

# ---------------------------------------------------------------------------------------
# Postgres

secure_pg_configured_port() { printf '%s' "$SECURE_PG_PORT"; }

# Beside the plain cluster: under the stack dir if the postgres user can reach it (see
# pg_base), else in a /tmp dir of its own (pg_destroy deletes the plain one's).
secure_pg_base() {
  if [ "$(pg_base)" = "$STACK_DIR/pg" ]; then
    printf '%s/pg' "$(secure_dir)"
  else
    printf '/tmp/outbox-relay-secure-%s/pg' "$(stack_hash)"
  fi
}

secure_pg_data_dir() { printf '%s/data' "$(secure_pg_base)"; }
secure_pg_marker() { secure_pg_data_dir; }
secure_pg_cluster_name() { printf 'outbox-secure-%s' "$(stack_hash)"; }

secure_pg_socket_dir() { short_socket_dir "$(secure_pg_base)/run" "/tmp/outbox-relay-secure-$(stack_hash)/pg-run"; }

secure_pg_fetch() { pg_fetch; }

secure_pg_init() {
  local base data log
  base=$(secure_pg_base)
  data=$(secure_pg_data_dir)
  log="$STACK_DIR/logs/secure_pg.log"
  say "secure_pg: initdb in $data"
  rm -rf "$data"
  mkdir -p "$base" "$(secure_pg_socket_dir)"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$base" "$(secure_pg_socket_dir)"; fi
  as_pg "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale >>"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; die "secure_pg: initdb failed"; }

  cat >>"$data/postgresql.conf" <<EOF

# --- outbox-relay secure stack (scripts/stack/secure.sh) ---
cluster_name = '$(secure_pg_cluster_name)'
listen_addresses = '127.0.0.1'
unix_socket_directories = '$(secure_pg_socket_dir)'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
max_connections = 100
fsync = off
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
log_min_messages = warning
# Refused connections are logged anyway (FATAL); successful ones are not.
log_connections = off
# TLS: copies of the stack's PEM files in the data dir (made at every start, owned by the
# postgres user, which the server insists on for its key).
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
ssl_ca_file = 'ca.crt'
ssl_min_protocol_version = 'TLSv1.2'
password_encryption = scram-sha-256
EOF
  # TCP only with TLS (no `host` lines: a plain connection finds no entry and is refused).
  # The certificate user first: its CN must equal the user name (cert implies verify-full
  # of the client certificate). The Unix socket is the script's own way in.
  cat >"$data/pg_hba.conf" <<EOF
# outbox-relay secure stack: TLS only on TCP, loopback only.
local    all          postgres                          trust
local    replication  postgres                          trust
hostssl  all          $SECURE_PG_CERT_USER  127.0.0.1/32  cert
hostssl  replication  $SECURE_PG_CERT_USER  127.0.0.1/32  cert
hostssl  all          all         127.0.0.1/32  scram-sha-256
hostssl  replication  all         127.0.0.1/32  scram-sha-256
EOF
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$data/postgresql.conf" "$data/pg_hba.conf"; fi
}

secure_pg_up() {
  pg_fetch
  tls_ensure
  [ -f "$(secure_pg_data_dir)/PG_VERSION" ] || secure_pg_init
  secure_pg_start
}

# Copies the server's certificate, key and the CA into the data dir, as the postgres user.
secure_pg_install_tls() {
  local data tls f
  data=$(secure_pg_data_dir)
  tls=$(tls_dir)
  for f in server.crt server.key ca.crt; do
    install -m 0600 "$tls/$f" "$data/$f"
    if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$data/$f"; fi
  done
}

secure_pg_start() {
  local data log pid sock
  data=$(secure_pg_data_dir)
  log="$STACK_DIR/logs/secure_pg.log"
  sock=$(secure_pg_socket_dir)
  [ -f "$data/PG_VERSION" ] || die "secure_pg: no cluster in $data (run: scripts/stack.sh up secure)"
  mkdir -p "$STACK_DIR/logs" "$sock"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$sock"; fi
  require_port_free secure_pg "$SECURE_PG_PORT" SECURE_PG_
  tls_ensure
  secure_pg_install_tls

  pg_wait_postmaster_gone "$(secure_pg_cluster_name)" "$data"

  pid=$(cd / && spawn "$log" "${PG_AS[@]}" "$PG_BIN/postgres" -D "$data" -p "$SECURE_PG_PORT" -k "$sock")
  echo "$pid" >"$(pid_file secure_pg)"
  echo "$SECURE_PG_PORT" >"$STACK_DIR/secure_pg.port"
  # Through the socket: over TCP, pg_isready cannot tell "up" from "refused by pg_hba".
  wait_until 120 "$pid" "$PG_BIN/pg_isready" -q -h "$sock" -p "$SECURE_PG_PORT" -U postgres -d postgres || return 1
  secure_pg_setup
}

secure_pg_psql() {
  "$PG_BIN/psql" -h "$(secure_pg_socket_dir)" -p "$SECURE_PG_PORT" -U postgres -Xq -v ON_ERROR_STOP=1 "$@"
}

# Roles, passwords and the outbox database; idempotent (run at every start).
secure_pg_setup() {
  secure_pg_psql -d postgres >/dev/null <<EOF
DO \$\$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$SECURE_PG_USER') THEN
    CREATE ROLE $SECURE_PG_USER LOGIN REPLICATION;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$SECURE_PG_CERT_USER') THEN
    CREATE ROLE $SECURE_PG_CERT_USER LOGIN REPLICATION;
  END IF;
END
\$\$;
ALTER ROLE postgres PASSWORD '$SECURE_PG_ADMIN_PASSWORD';
ALTER ROLE $SECURE_PG_USER PASSWORD '$SECURE_PG_PASSWORD';
EOF
  if [ "$(secure_pg_psql -d postgres -tAc "select 1 from pg_database where datname = 'outbox'")" != 1 ]; then
    secure_pg_psql -d postgres -c 'create database outbox owner postgres' >/dev/null
    say "secure_pg: created database outbox"
  fi
  # The relay's roles may create their own tables, publications' tables and slots.
  secure_pg_psql -d outbox -c "grant create on database outbox to $SECURE_PG_USER, $SECURE_PG_CERT_USER; grant create on schema public to $SECURE_PG_USER, $SECURE_PG_CERT_USER" >/dev/null
}

secure_pg_stop() {
  postgres_stop secure_pg "${1:-}"
}

secure_pg_destroy() {
  rm -rf "$(secure_pg_base)" "/tmp/outbox-relay-secure-$(stack_hash)"
  secure_dir_cleanup
}

# ---------------------------------------------------------------------------------------
# Schema registry

secure_registry_configured_port() { printf '%s' "$SECURE_REGISTRY_PORT"; }
secure_registry_dir() { printf '%s/registry' "$(secure_dir)"; }
secure_registry_data_dir() { secure_registry_dir; }
secure_registry_marker() { printf -- '-Doutbox.stack.secure-registry=%s' "$STACK_DIR"; }

secure_registry_fetch() { registry_fetch; }

secure_registry_up() { secure_registry_start; }

# Quarkus reads config/application.properties in the working directory (so the passwords
# are in a file of the stack dir, not on the command line).
secure_registry_write_config() {
  local dir=$1 tls compat
  tls=$(tls_dir)
  compat="${OUTBOX_REGISTRY_COMPATIBILITY:-BACKWARD}"
  mkdir -p "$dir/config"
  {
    cat <<EOF
# outbox-relay secure stack: Apicurio Registry over HTTPS only, with HTTP basic auth.
# HTTPS: PEM certificate and key; the plain HTTP port is not opened at all.
quarkus.http.host=127.0.0.1
quarkus.http.ssl-port=$SECURE_REGISTRY_PORT
quarkus.http.ssl.certificate.files=$tls/server.crt
quarkus.http.ssl.certificate.key-files=$tls/server.key
quarkus.http.insecure-requests=disabled
# Health (/health/ready) and metrics (/metrics) on the management port, HTTPS too.
quarkus.management.host=127.0.0.1
quarkus.management.port=$SECURE_REGISTRY_MGMT_PORT
quarkus.management.ssl.certificate.files=$tls/server.crt
quarkus.management.ssl.certificate.key-files=$tls/server.key

# Authentication: Apicurio's own mechanism chain (AuthConfig/AppAuthenticationMechanism)
# with "basic" enabled by quarkus.http.auth.basic and no OIDC; the identities are Quarkus'
# embedded users (quarkus-elytron-security-properties-file is in the bundle, and
# quarkus.security.users.embedded.enabled=true is set at build time in its
# application.properties). Requests without valid credentials get 401.
quarkus.oidc.tenant-enabled=false
quarkus.http.auth.basic=true
quarkus.security.users.embedded.plain-text=true
quarkus.security.users.embedded.users.$SECURE_REGISTRY_USER=$SECURE_REGISTRY_PASSWORD
quarkus.security.users.embedded.roles.$SECURE_REGISTRY_USER=sr-developer
quarkus.security.users.embedded.users.$SECURE_REGISTRY_READER=$SECURE_REGISTRY_READER_PASSWORD
quarkus.security.users.embedded.roles.$SECURE_REGISTRY_READER=sr-readonly
# Authorization by role (sr-readonly / sr-developer / sr-admin): the reader gets 403 on writes.
apicurio.auth.role-based-authorization=true
apicurio.auth.role-source=token

quarkus.otel.sdk.disabled=true
apicurio.ccompat.max-subjects=100000
EOF
    [ "$compat" = NONE ] || printf 'apicurio.rules.global.compatibility=%s\n' "$compat"
  } >"$dir/config/application.properties"
  chmod 600 "$dir/config/application.properties"
}

secure_registry_start() {
  local dir log pid
  registry_resolve
  tls_ensure
  dir=$(secure_registry_dir)
  log="$STACK_DIR/logs/secure_registry.log"
  mkdir -p "$dir/tmp" "$STACK_DIR/logs"
  require_port_free secure_registry "$SECURE_REGISTRY_PORT" SECURE_REGISTRY_
  require_port_free secure_registry-management "$SECURE_REGISTRY_MGMT_PORT" SECURE_REGISTRY_MGMT_
  secure_registry_write_config "$dir"

  pid=$(cd "$dir" && spawn "$log" "$REGISTRY_JAVA" -Xms128m -Xmx512m \
    "$(secure_registry_marker)" \
    -Djava.io.tmpdir="$dir/tmp" -Dvertx.cacheDirBase="$dir/tmp/vertx-cache" \
    -Dapicurio.storage.snapshot.location="$dir/tmp" -Dapicurio.import.work-dir="$dir/tmp" \
    -jar "$(registry_jar)")
  echo "$pid" >"$(pid_file secure_registry)"
  echo "$SECURE_REGISTRY_PORT" >"$STACK_DIR/secure_registry.port"
  wait_until 120 "$pid" curl -fsS -o /dev/null --max-time 2 --cacert "$(tls_dir)/ca.crt" \
    -u "$SECURE_REGISTRY_USER:$SECURE_REGISTRY_PASSWORD" \
    "https://127.0.0.1:$SECURE_REGISTRY_PORT/apis/ccompat/v7/subjects" || return 1
}

secure_registry_stop() { stop_service secure_registry 30 "${1:-}"; }

secure_registry_destroy() { rm -rf "$(secure_registry_dir)"; secure_dir_cleanup; }

# ---------------------------------------------------------------------------------------

# KEY='value' lines for `scripts/stack.sh env` (quoted: URLs contain & and ?).
secure_env_lines() {
  local tls ca q
  tls=$(tls_dir)
  ca="$tls/ca.crt"
  q="sslmode=verify-full&sslrootcert=$ca"
  cat <<EOF
SECURE_KAFKA_SASL_SSL_BROKERS='127.0.0.1:$SECURE_KAFKA_SASL_PORT'
SECURE_KAFKA_MTLS_BROKERS='127.0.0.1:$SECURE_KAFKA_MTLS_PORT'
SECURE_KAFKA_ADMIN_USER='$SECURE_KAFKA_ADMIN_USER'
SECURE_KAFKA_ADMIN_PASSWORD='$SECURE_KAFKA_ADMIN_PASSWORD'
SECURE_KAFKA_USER='$SECURE_KAFKA_USER'
SECURE_KAFKA_PASSWORD='$SECURE_KAFKA_PASSWORD'
SECURE_KAFKA_MTLS_PRINCIPAL='User:$TLS_CLIENT_CN'
SECURE_KAFKA_ADMIN_CONFIG='$(secure_kafka_admin_config)'
SECURE_DATABASE_URL='postgres://$SECURE_PG_USER:$SECURE_PG_PASSWORD@127.0.0.1:$SECURE_PG_PORT/outbox?$q'
SECURE_DATABASE_CERT_URL='postgres://$SECURE_PG_CERT_USER@127.0.0.1:$SECURE_PG_PORT/outbox?$q&sslcert=$tls/client.crt&sslkey=$tls/client.key'
SECURE_DATABASE_ADMIN_URL='postgres://postgres:$SECURE_PG_ADMIN_PASSWORD@127.0.0.1:$SECURE_PG_PORT/outbox?$q'
SECURE_SCHEMA_REGISTRY_URL='https://127.0.0.1:$SECURE_REGISTRY_PORT/apis/ccompat/v7'
SECURE_SCHEMA_REGISTRY_USER='$SECURE_REGISTRY_USER'
SECURE_SCHEMA_REGISTRY_PASSWORD='$SECURE_REGISTRY_PASSWORD'
SECURE_SCHEMA_REGISTRY_READER='$SECURE_REGISTRY_READER'
SECURE_SCHEMA_REGISTRY_READER_PASSWORD='$SECURE_REGISTRY_READER_PASSWORD'
SECURE_TLS_DIR='$tls'
SECURE_TLS_CA='$ca'
SECURE_TLS_CLIENT_CERT='$tls/client.crt'
SECURE_TLS_CLIENT_KEY='$tls/client.key'
EOF
}
