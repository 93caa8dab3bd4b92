#!/usr/bin/env bash
# Prepares (cached) what the container step of make gpu-smoke runs, and
# prints "runc <path>" and "rootfs <path>":
#
#   runc    built from its Go module (github.com/opencontainers/runc
#           $RUNC_VERSION) in a throwaway module under the cache, without
#           seccomp or libpathrs (both need C libraries the host may lack;
#           the smoke container needs neither), as hack/cluster/build.sh
#           builds the cluster's binaries;
#   rootfs  Debian's glibc (libc6 and libc-bin: the loader, ld.so.conf and
#           ldconfig, which nvidia-cdi-hook update-ldcache runs inside the
#           container) and test/gpusmoke/probe/kernelprobe.c built with gcc.
#           No NVIDIA file: the claim's CDI spec brings the driver's. Keyed by
#           the SHA-256 of the probe and of the header it includes
#           (test/probe/nvprobe.h) and the libc packages' names, so an edit of
#           either or a glibc update builds a new one.
#
# Everything lives under ${GPU_DRA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-dra-driver}.
# Progress goes to stderr; stdout is the two lines only.
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "$0")/cluster/lib.sh"
REPO=$(cd "$(dirname "$0")/.." && pwd)
RUNC_VERSION=${RUNC_VERSION:-v1.5.1}
PROBE=$REPO/test/gpusmoke/probe/kernelprobe.c
PROBE_HEADER=$REPO/test/probe/nvprobe.h # the code it shares with the e2e image's cudaprobe

mkdir -p "$CACHE/build"
exec 7>"$CACHE/build/.smoke-container.lock"
flock 7

runc_bin() {
  local out=$CACHE/bin/runc-$RUNC_VERSION/runc d=$CACHE/build/runc-$RUNC_VERSION s
  if [ ! -x "$out" ]; then
    s=$(now)
    mkdir -p "$d" "$(dirname "$out")"
    (cd "$d" && { [ -f go.mod ] || printf 'module runcwrap\ngo 1.26\n' > go.mod; } &&
      printf '//go:build tools\npackage tools\n\nimport _ "github.com/opencontainers/runc"\n' > tools.go &&
      go get "github.com/opencontainers/runc@$RUNC_VERSION" && go mod tidy &&
      CGO_ENABLED=1 go build -trimpath -tags urfave_cli_no_docs -ldflags "-s -w" -o "$out.tmp" github.com/opencontainers/runc) >&2 ||
      die "runc $RUNC_VERSION build failed"
    mv "$out.tmp" "$out"
    say "built runc $RUNC_VERSION in $(since "$s")s" >&2
  fi
  echo "$out"
}

rootfs() {
  local debs key r deb
  debs=$(debs libc6 libc-bin)
  key=$({ sha256sum "$PROBE" "$PROBE_HEADER" | cut -c1-16; for deb in $debs; do basename "$deb"; done; } | sha256sum | cut -c1-16)
  r=$CACHE/build/smoke-rootfs-$key
  if [ ! -f "$r/.gdra-complete" ]; then
    rm -rf "$r" "$r.tmp"
    mkdir -p "$r.tmp"/{bin,dev,proc,sys,tmp,etc}
    for deb in $debs; do dpkg -x "$deb" "$r.tmp"; done
    gcc -O2 -Wall -Werror -o "$r.tmp/bin/kernelprobe" "$PROBE" -ldl
    echo 'root:x:0:0:root:/root:/bin/sh' > "$r.tmp/etc/passwd"; echo 'root:x:0:' > "$r.tmp/etc/group"
    # No ld.so.cache of its own: the one the probe finds is the hook's.
    rm -f "$r.tmp/etc/ld.so.cache"
    echo "gpu-smoke container rootfs, built by hack/smoke-container.sh" > "$r.tmp/.gdra-complete"
    mv "$r.tmp" "$r"
    say "built the smoke container's rootfs in $r" >&2
  fi
  echo "$r"
}

echo "runc $(runc_bin)"
echo "rootfs $(rootfs)"
