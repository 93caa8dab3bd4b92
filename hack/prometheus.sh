#!/usr/bin/env bash
# Copyright 2026 The gpu-dra-driver Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Unpacks Debian 12's prometheus package (pinned version and SHA256) into the
# cache and prints its usr/bin directory, which holds prometheus and
# promtool. Nothing is installed on the host: apt-get download fetches the
# .deb alone and dpkg -x unpacks it under the cache. make test runs promtool
# on the chart's alert rules (test/prometheus) and the e2e test
# TestPrometheus runs the server against the local cluster.
#
# Usage: hack/prometheus.sh           prepare (cached) and print the bin dir
# Env:   GPU_DRA_CACHE / XDG_CACHE_HOME pick the cache (hack/cluster/lib.sh).
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "$0")/cluster/lib.sh"

PROMETHEUS_DEB_VERSION=2.42.0+ds-5+deb12u1
PROMETHEUS_DEB_SHA256=81d59a24fce84f7fbe97a45a4f2914b6a5881b5cd1db2a6a0e129e515e1a5f55

DIR=$CACHE/prometheus/$PROMETHEUS_DEB_VERSION
if [ -f "$DIR/.gdra-complete" ]; then echo "$DIR/usr/bin"; exit 0; fi

for c in apt-get dpkg sha256sum flock; do
  command -v "$c" >/dev/null || die "$c not found: this script needs a Debian host"
done
mkdir -p "$CACHE/prometheus"
exec 8>"$CACHE/prometheus/.lock"
flock 8
if [ -f "$DIR/.gdra-complete" ]; then echo "$DIR/usr/bin"; exit 0; fi

deb=$CACHE/prometheus/prometheus_${PROMETHEUS_DEB_VERSION}_amd64.deb
if ! echo "$PROMETHEUS_DEB_SHA256  $deb" | sha256sum -c --status 2>/dev/null; then
  say "downloading prometheus $PROMETHEUS_DEB_VERSION (Debian 12)" >&2
  # Through a private apt configuration with its own package lists: a
  # fresh machine's lists can be older than the pinned point release (CI
  # failed so: the host's lists offered only 2.42.0+ds-5+b6).
  apt=$CACHE/prometheus/apt
  mkdir -p "$apt"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${GDRA_DEBIAN_URI:-http://deb.debian.org/debian} bookworm main" > "$apt/sources.list"
  apt_private "$apt" apt-get update || die "apt-get update (private configuration in $apt) failed"
  tmp=$(mktemp -d "$CACHE/prometheus/dl.XXXXXX")
  (cd "$tmp" && apt_private "$apt" apt-get download "prometheus=$PROMETHEUS_DEB_VERSION" >/dev/null 2>&1) ||
    { rm -rf "$tmp"; die "apt-get download prometheus=$PROMETHEUS_DEB_VERSION failed: if Debian's archive no longer has it, set GDRA_DEBIAN_URI to a snapshot that does (https://snapshot.debian.org/archive/debian/<timestamp>)"; }
  mv "$tmp"/prometheus_*.deb "$deb"; rm -rf "$tmp"
  echo "$PROMETHEUS_DEB_SHA256  $deb" | sha256sum -c --status || die "$deb: SHA256 is not the pinned $PROMETHEUS_DEB_SHA256"
fi
rm -rf "$DIR"
mkdir -p "$DIR"
dpkg -x "$deb" "$DIR"
"$DIR/usr/bin/promtool" --version >/dev/null || die "promtool in $deb does not run"
touch "$DIR/.gdra-complete"
echo "$DIR/usr/bin"
