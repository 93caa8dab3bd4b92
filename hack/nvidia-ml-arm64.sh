#!/usr/bin/env bash
# NVIDIA's arm64 R535 libnvidia-ml (Debian 12 non-free, the same driver
# release hack/nvidia-userspace.sh pins for amd64), pinned by version and
# SHA-256 like the amd64 packages, unpacked into a driver root in the cache
# with a Debian host's layout: usr/lib/aarch64-linux-gnu/nvidia/current/
# and the link nvidia-alternative makes (usr/lib/aarch64-linux-gnu/
# libnvidia-ml.so.1, relative). hack/arm64-check.sh starts the arm64 plugin
# on it under qemu, without a kernel module. Nothing outside the cache is
# written (a private apt configuration, arm64 and non-free only).
# Usage: hack/nvidia-ml-arm64.sh        prepare (cached) and print the root
# Env: GDRA_NVIDIA_DEB_BASE downloads the pinned .deb from
#      $GDRA_NVIDIA_DEB_BASE/<pool path> instead (a mirror or snapshot.debian.org);
#      GDRA_NVIDIA_DEBIAN_URI replaces http://deb.debian.org/debian for apt.
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "$0")/cluster/lib.sh"
PATH=$PATH:/usr/sbin:/sbin

# package  version  pool path  SHA256 of the .deb (as Debian's signed
# bookworm non-free binary-arm64 Packages index lists it).
PINNED="libnvidia-ml1 535.261.03-1 pool/non-free/n/nvidia-graphics-drivers/libnvidia-ml1_535.261.03-1_arm64.deb 413b096786a88563a0e843a5c96ad68857d69106a0891a5eb8ffdc47fe64928d"
read -r pkg ver path sum <<<"$PINNED"
NV=$CACHE/nvidia
DIR=$NV/${ver%-*}-arm64
ROOT=$DIR/host
APT=$NV/apt-arm64
deb=$DIR/$(basename "$path")
TRIPLET=aarch64-linux-gnu

[ -f "$ROOT/.gdra-complete" ] && { echo "$ROOT"; exit 0; }
mkdir -p "$DIR"
exec 8>"$DIR/.lock"
flock 8
[ -f "$ROOT/.gdra-complete" ] && { echo "$ROOT"; exit 0; }

ok() { [ -f "$deb" ] && echo "$sum  $deb" | sha256sum --check --status; }
if ! ok; then
  rm -f "$deb"
  if [ -n "${GDRA_NVIDIA_DEB_BASE:-}" ]; then
    curl -fsSL --retry 3 -o "$deb.part" "$GDRA_NVIDIA_DEB_BASE/$path" || die "download $GDRA_NVIDIA_DEB_BASE/$path failed"
    mv "$deb.part" "$deb"
  else
    mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/preferences.d"
    : > "$APT/preferences"; : > "$APT/status"
    echo "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${GDRA_NVIDIA_DEBIAN_URI:-http://deb.debian.org/debian} bookworm non-free" > "$APT/sources.list"
    opts=(
      -o "Dir::Etc::sourcelist=$APT/sources.list" -o Dir::Etc::sourceparts=-
      -o "Dir::State::Lists=$APT/lists" -o "Dir::State::status=$APT/status" -o "Dir::Cache=$APT/cache"
      -o "Dir::Etc::preferencesparts=$APT/preferences.d" -o "Dir::Etc::preferences=$APT/preferences"
      -o APT::Architecture=arm64 -o APT::Architectures=arm64 -o APT::Get::List-Cleanup=0 -o Acquire::Languages=none
    )
    [ "$(id -u)" = 0 ] && opts+=(-o APT::Sandbox::User=root)
    say "downloading $pkg $ver (arm64) with a private apt configuration in $APT" >&2
    apt-get -qq "${opts[@]}" update >&2 || die "apt-get update (private configuration in $APT) failed"
    (cd "$DIR" && apt-get -qq "${opts[@]}" download "$pkg:arm64=$ver" >&2) ||
      die "apt-get download $pkg:arm64=$ver failed: if Debian's archive no longer has it, set GDRA_NVIDIA_DEB_BASE (e.g. https://snapshot.debian.org/archive/debian/<timestamp>)"
  fi
  ok || { echo "$pkg $ver: SHA256 $(sha256sum "$deb" | cut -d' ' -f1), pinned $sum" >&2; rm -f "$deb"; die "checksum mismatch for $deb"; }
fi
rm -rf "$ROOT"; mkdir -p "$ROOT"
dpkg -x "$deb" "$ROOT"
lib=$ROOT/usr/lib/$TRIPLET/nvidia/current/libnvidia-ml.so.1
[ -e "$lib" ] || die "$pkg $ver has no usr/lib/$TRIPLET/nvidia/current/libnvidia-ml.so.1"
# nvidia-alternative's link, relative so the root can sit anywhere.
ln -sfn nvidia/current/libnvidia-ml.so.1 "$ROOT/usr/lib/$TRIPLET/libnvidia-ml.so.1"
touch "$ROOT/.gdra-complete"
echo "$ROOT"
