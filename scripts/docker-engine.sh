#!/usr/bin/env bash
# A Docker engine for the compose stage (scripts/test-compose.sh), from Debian's packages, on a
# socket of its own: nothing else on the machine talks to it unless told (DOCKER_HOST), so the
# integration tests, which use testcontainers whenever `docker info` answers, keep the local stack.
#
# Usage: scripts/docker-engine.sh COMMAND
#   install   as root: apt-get Debian's docker.io (engine), docker-compose (Compose 1.29, used
#             when no `docker compose` v2 plugin is there) and debootstrap (the stand-in images'
#             base, scripts/compose-images.sh), those missing
#   start     start dockerd unless it answers; wait until it does (30 s at most)
#   stop      stop it (its containers with it); the images stay in the data root
#   status    exit 0 if it answers, 1 otherwise
#   env       print DOCKER_HOST=... for it (eval "$(scripts/docker-engine.sh env)")
#
# Environment:
#   OUTBOX_DOCKER_ROOT    data root, kept between runs: the images built on this machine stay
#                         cached there (/var/lib/outbox-relay-docker)
#   OUTBOX_DOCKER_SOCKET  its API socket (/run/outbox-relay-docker.sock)
#   OUTBOX_DOCKER_POOL    where its networks take their subnets (10.213.0.0/16): the compose
#                         test lets the webhooks service reach a receiver on its network's
#                         gateway through OUTBOX_WEBHOOK_ALLOW_ADDRESSES set to this range
set -euo pipefail

ROOT="${OUTBOX_DOCKER_ROOT:-/var/lib/outbox-relay-docker}"
SOCKET="${OUTBOX_DOCKER_SOCKET:-/run/outbox-relay-docker.sock}"
POOL="${OUTBOX_DOCKER_POOL:-10.213.0.0/16}"
EXEC_ROOT=/run/outbox-relay-docker
PID_FILE="$EXEC_ROOT/dockerd.pid"
LOG="$ROOT.log"
PACKAGES=(docker.io docker-compose debootstrap)

say() { printf '[docker-engine] %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

answers() { DOCKER_HOST="unix://$SOCKET" timeout 5 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

missing_packages() {
  local pkg
  for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || printf '%s\n' "$pkg"
  done
}

cmd_install() {
  local wanted
  mapfile -t wanted < <(missing_packages)
  [ ${#wanted[@]} -gt 0 ] || return 0
  [ "$(id -u)" = 0 ] || die "installing ${wanted[*]} needs root (apt-get)"
  say "installing Debian packages: ${wanted[*]}"
  # policy-rc.d: the package's own service (dockerd on the default socket) is not started; this
  # script starts the one the stage uses.
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${wanted[@]}" >&2 \
    || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${wanted[@]}" >&2; } \
    || { [ "$made_policy" = 0 ] || rm -f "$policy"; die "could not install ${wanted[*]} with apt-get"; }
  [ "$made_policy" = 0 ] || rm -f "$policy"
}

# overlay2 where the kernel has overlayfs (copy-on-write layers: a container starts without
# copying its image), vfs otherwise (a full copy per layer: slower, bigger, works everywhere).
storage_driver() {
  if grep -qw overlay /proc/filesystems; then echo overlay2; else echo vfs; fi
}

cmd_start() {
  if answers; then say "dockerd answers on $SOCKET"; return 0; fi
  command -v dockerd >/dev/null || die "no dockerd: run scripts/docker-engine.sh install (as root)"
  [ "$(id -u)" = 0 ] || die "dockerd runs as root here"
  mkdir -p "$ROOT" "$EXEC_ROOT"
  local mtu driver
  # The containers' MTU is the host's: packets of a bigger one are dropped on the way out
  # (apt-get in an image build would hang).
  mtu=$(cat "/sys/class/net/$(ip route show default | awk '{print $5; exit}')/mtu" 2>/dev/null || echo 1500)
  driver=$(storage_driver)
  say "starting dockerd ($driver, data root $ROOT, socket $SOCKET, networks from $POOL, log $LOG)"
  setsid dockerd --data-root "$ROOT" --exec-root "$EXEC_ROOT" --pidfile "$PID_FILE" \
    -H "unix://$SOCKET" --storage-driver "$driver" --mtu "$mtu" \
    --bip "${POOL%.*.*/*}.255.1/24" --default-address-pool "base=$POOL,size=24" \
    >>"$LOG" 2>&1 </dev/null &
  local i
  for i in $(seq 1 60); do
    answers && { say "dockerd answers (pid $(cat "$PID_FILE"))"; return 0; }
    kill -0 $! 2>/dev/null || break
    sleep 0.5
  done
  tail -n 20 "$LOG" >&2
  die "dockerd did not answer on $SOCKET"
}

cmd_stop() {
  [ -f "$PID_FILE" ] || { say "dockerd is not running"; return 0; }
  local pid i
  pid=$(cat "$PID_FILE")
  kill -0 "$pid" 2>/dev/null || { rm -f "$PID_FILE"; say "dockerd is not running"; return 0; }
  say "stopping dockerd (pid $pid) and its containers"
  kill -TERM "$pid"
  # dockerd gives each container 15 s (its stop timeout) and then stops its containerd.
  for i in $(seq 1 120); do
    kill -0 "$pid" 2>/dev/null || { say "dockerd stopped"; return 0; }
    sleep 0.5
  done
  say "dockerd (pid $pid) did not stop in 60 s: killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) answers ;;
  env) printf 'DOCKER_HOST=unix://%s\n' "$SOCKET" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
