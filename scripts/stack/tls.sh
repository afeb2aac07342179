# Test certificates for the secure stack (sourced by scripts/stack/secure.sh): a CA of
# this stack dir and PEM files signed by it, made with openssl once per stack dir into
# $STACK_DIR/tls, and made again only when missing or about to expire.
#
#   ca.crt ca.key                 the test CA (CN "outbox-relay test CA ..."), 10 years
#   server.crt server.key         Postgres and the registry: CN=localhost, SAN DNS:localhost,
#                                 IP:127.0.0.1; serverAuth
#   kafka-broker.crt .key .pem    the broker: CN=kafka-broker (its Kafka principal), same SAN;
#                                 serverAuth + clientAuth (it is a client of its own
#                                 controller and internal listeners); .pem = key + chain,
#                                 which is what a Kafka PEM keystore file holds
#   client.crt client.key         the relay's client certificate: CN=relay_cert (Postgres user
#                                 for `cert` auth, Kafka principal User:relay_cert); clientAuth
#   client-expired.crt .key       same subject and CA, but expired (valid 2020-01-01 to 01-02)
#   rogue-ca.crt rogue-ca.key     an unrelated CA (for "wrong CA" cases on either side)
#   rogue-client.crt .key         CN=relay_cert signed by the rogue CA
#
# Keys are unencrypted PKCS#8 RSA 2048 ("BEGIN PRIVATE KEY"), files 0600 (the CA and the
# certificates 0644). Leaf certificates are valid 397 days.

TLS_CLIENT_CN=relay_cert
TLS_BROKER_CN=kafka-broker
TLS_LEAF_DAYS=397

tls_dir() { printf '%s/tls' "$STACK_DIR"; }

# Makes the files unless they are all there and valid for at least another day.
tls_ensure() {
  local dir f
  dir=$(tls_dir)
  for f in ca.crt server.crt server.key kafka-broker.pem client.crt client.key \
           client-expired.crt rogue-ca.crt rogue-client.crt; do
    [ -s "$dir/$f" ] || { tls_generate_locked; return; }
  done
  for f in ca.crt server.crt kafka-broker.crt client.crt; do
    openssl x509 -checkend 86400 -noout -in "$dir/$f" >/dev/null 2>&1 || { tls_generate_locked; return; }
  done
}

# Under a lock of the stack dir: two `up`s at once must not write the same files.
tls_generate_locked() {
  command -v openssl >/dev/null || die "tls: openssl is needed to make the test certificates"
  mkdir -p "$STACK_DIR/logs"
  (
    flock 9
    tls_generate
  ) 9>"$STACK_DIR/.tls.lock"
}

tls_generate() {
  local dir tmp t0
  dir=$(tls_dir)
  t0=$(now)
  tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  (
    set -e
    cd "$tmp"
    umask 077
    tls_openssl_config >openssl.cnf

    # The CA.
    tls_key ca.key
    openssl req -new -x509 -config openssl.cnf -extensions v3_ca -key ca.key -sha256 -days 3650 \
      -subj "/O=outbox-relay tests/CN=outbox-relay test CA $(stack_hash)" -out ca.crt

    tls_leaf server localhost server_cert ca
    tls_leaf kafka-broker "$TLS_BROKER_CN" broker_cert ca
    cat kafka-broker.key kafka-broker.crt >kafka-broker.pem
    tls_leaf client "$TLS_CLIENT_CN" client_cert ca

    # Expired: `openssl ca` is the one openssl 3.0 command that takes explicit dates.
    tls_key client-expired.key
    openssl req -new -config openssl.cnf -key client-expired.key -subj "/CN=$TLS_CLIENT_CN" -out client-expired.csr
    mkdir -p cadb
    : >cadb/index.txt
    printf '1000\n' >cadb/serial
    openssl ca -batch -config openssl.cnf -name expired_ca -extensions client_cert -notext \
      -startdate 20200101000000Z -enddate 20200102000000Z \
      -in client-expired.csr -out client-expired.crt 2>/dev/null

    # A CA nobody trusts, and a client certificate from it.
    tls_key rogue-ca.key
    openssl req -new -x509 -config openssl.cnf -extensions v3_ca -key rogue-ca.key -sha256 -days 3650 \
      -subj "/O=outbox-relay tests/CN=outbox-relay ROGUE CA" -out rogue-ca.crt
    tls_leaf rogue-client "$TLS_CLIENT_CN" client_cert rogue-ca

    rm -rf ./*.csr ./*.srl cadb openssl.cnf
    chmod 0644 ./*.crt
  ) >>"$STACK_DIR/logs/tls.log" 2>&1 || { rm -rf "$tmp"; tail -n 20 "$STACK_DIR/logs/tls.log" >&2; die "tls: making the test certificates failed"; }
  rm -rf "$dir"
  mv "$tmp" "$dir"
  say "tls: made a test CA and certificates in $dir in $(elapsed "$t0")s"
}

tls_key() { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null; }

# tls_leaf NAME CN EXTENSIONS CA: NAME.key and NAME.crt, signed by CA.crt/CA.key.
tls_leaf() {
  local name=$1 cn=$2 ext=$3 ca=$4
  tls_key "$name.key"
  openssl req -new -config openssl.cnf -key "$name.key" -subj "/CN=$cn" -out "$name.csr"
  openssl x509 -req -in "$name.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -sha256 \
    -days "$TLS_LEAF_DAYS" -extfile openssl.cnf -extensions "$ext" -out "$name.crt"
}

tls_openssl_config() {
  cat <<'EOF'
[ req ]
distinguished_name = dn
prompt = no
[ dn ]
CN = unused
[ v3_ca ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[ server_cert ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[ broker_cert ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[ client_cert ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[ expired_ca ]
dir = cadb
database = cadb/index.txt
new_certs_dir = cadb
serial = cadb/serial
certificate = ca.crt
private_key = ca.key
default_md = sha256
policy = any_cn
unique_subject = no
copy_extensions = none
[ any_cn ]
commonName = supplied
EOF
}
