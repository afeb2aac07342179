#!/usr/bin/env bash
# The stand-in images' base (scripts/compose-images.sh): a Debian root file system made by
# debootstrap from Debian's packages, trimmed as Debian's own slim images are (no manuals,
# documentation but the copyright files, translations, package lists), for `docker import`.
#
# Usage: deploy/images/debian/rootfs.sh DIR   (as root; DIR must not exist)
# Environment: OUTBOX_DEBIAN_SUITE (bookworm), OUTBOX_DEBIAN_MIRROR (http://deb.debian.org/debian)
set -euo pipefail
dir=$1
suite="${OUTBOX_DEBIAN_SUITE:-bookworm}"
mirror="${OUTBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
[ ! -e "$dir" ] || { echo "rootfs: $dir exists" >&2; exit 1; }

debootstrap --variant=minbase "$suite" "$dir" "$mirror" >&2

# Updates and security fixes too, as in Debian's images.
cat >"$dir/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb ${mirror%/debian}/debian-security $suite-security main
SOURCES

# What later installs (the images' own apt-get) leave out too.
cat >"$dir/etc/dpkg/dpkg.cfg.d/slim" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
DPKG
find "$dir/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$dir/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/locale/* "$dir"/usr/share/lintian/*

# No package cache after an install (what Debian's images set), no service started by one.
cat >"$dir/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
chmod +x "$dir/usr/sbin/policy-rc.d"

rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb "$dir"/var/cache/debconf/*-old "$dir"/tmp/*
find "$dir/var/log" -type f -delete
# Docker mounts its own; nothing of the building host stays in the image.
: >"$dir/etc/resolv.conf"
: >"$dir/etc/hostname"
