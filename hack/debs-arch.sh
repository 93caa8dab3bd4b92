#!/usr/bin/env bash
# Downloads Debian 12 (bookworm) packages built for another architecture,
# e.g. arm64's libc6 for the arm64 driver image, without touching the host's
# apt configuration or dpkg architectures: a private apt configuration under
# the cache (like hack/nvidia-userspace.sh's) reads bookworm, bookworm-updates
# and bookworm-security (main) for that architecture only. Its lists are
# refreshed when a day old. Prints one .deb path a line, in argument order;
# the version is apt's candidate (security updates included).
# Usage: hack/debs-arch.sh ARCH PKG...
# Env: GDRA_DEBIAN_URI (default http://deb.debian.org/debian) and
#      GDRA_DEBIAN_SECURITY_URI (default http://deb.debian.org/debian-security).
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "$0")/cluster/lib.sh"
arch=${1:?usage: $0 ARCH PKG...}; shift
[ $# -gt 0 ] || die "usage: $0 ARCH PKG..."
APT=$CACHE/apt-$arch
DEBS=$CACHE/debs-$arch
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/preferences.d" "$DEBS"
: > "$APT/preferences"
: > "$APT/status"
opts=(
  -o "Dir::Etc::sourcelist=$APT/sources.list" -o Dir::Etc::sourceparts=-
  -o "Dir::State::Lists=$APT/lists" -o "Dir::State::status=$APT/status" -o "Dir::Cache=$APT/cache"
  -o "Dir::Etc::preferencesparts=$APT/preferences.d" -o "Dir::Etc::preferences=$APT/preferences"
  -o "APT::Architecture=$arch" -o "APT::Architectures=$arch"
  -o APT::Get::List-Cleanup=0 -o Acquire::Languages=none
)
[ "$(id -u)" = 0 ] && opts+=(-o APT::Sandbox::User=root)
exec 8>"$APT/.lock"
flock 8
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
{
  echo "deb [arch=$arch signed-by=$keyring] ${GDRA_DEBIAN_URI:-http://deb.debian.org/debian} bookworm main"
  echo "deb [arch=$arch signed-by=$keyring] ${GDRA_DEBIAN_URI:-http://deb.debian.org/debian} bookworm-updates main"
  echo "deb [arch=$arch signed-by=$keyring] ${GDRA_DEBIAN_SECURITY_URI:-http://deb.debian.org/debian-security} bookworm-security main"
} > "$APT/sources.list.new"
if ! cmp -s "$APT/sources.list.new" "$APT/sources.list" || [ ! -f "$APT/.updated" ] || [ -n "$(find "$APT/.updated" -mmin +1440)" ]; then
  mv "$APT/sources.list.new" "$APT/sources.list"
  apt-get -qq "${opts[@]}" update >&2 || die "apt-get update for $arch (private configuration in $APT) failed"
  touch "$APT/.updated"
fi
rm -f "$APT/sources.list.new"
for p; do
  v=$(apt-cache "${opts[@]}" policy "$p" | awk '/Candidate:/ {print $2}')
  [ -n "$v" ] && [ "$v" != "(none)" ] || die "no $arch candidate for $p"
  f=$DEBS/${p}_${v//:/%3a}_$arch.deb
  if [ ! -f "$f" ]; then
    (cd "$DEBS" && apt-get -qq "${opts[@]}" download "$p:$arch=$v" >&2) || die "apt-get download $p:$arch=$v failed"
  fi
  [ -f "$f" ] || die "$f missing after download"
  echo "$f"
done
