#!/usr/bin/env bash
# Unpacks a pinned NVIDIA userspace (Debian 12's non-free R535 packages) into
# two driver roots under the cluster cache, one per layout users have:
#
#   host      a Debian/Ubuntu host install: libraries in
#             usr/lib/x86_64-linux-gnu/nvidia/current/, the alternatives links
#             nvidia-alternative creates (usr/lib/x86_64-linux-gnu/libcuda.so.1
#             -> etc/alternatives/... -> nvidia/current/libcuda.so.1, the same
#             for libnvidia-ml.so.1, usr/bin/nvidia-smi, ...), its own
#             etc/ld.so.conf and etc/ld.so.cache.
#   operator  the GPU Operator's containerized driver root (what a node has at
#             /run/nvidia/driver): flat libraries in usr/lib/x86_64-linux-gnu/,
#             binaries in usr/bin/, its own etc/ld.so.cache.
#
# Every link inside a root is relative, so the root can sit anywhere. Nothing
# outside the cache is written: not the host's apt sources (a private apt
# configuration under the cache reads Debian's non-free component), not the
# host's library paths or /etc/ld.so.cache (ldconfig -r <root>).
#
# Usage: hack/nvidia-userspace.sh                 prepare (cached) and print "host <dir>" and "operator <dir>"
#        hack/nvidia-userspace.sh --print-root host|operator
#                                                 prepare (cached) and print that root only
# Env: GPU_DRA_CACHE / XDG_CACHE_HOME pick the cache (hack/cluster/lib.sh);
#      GDRA_NVIDIA_DEB_BASE downloads the pinned .debs from
#      $GDRA_NVIDIA_DEB_BASE/<pool path> instead of apt (a mirror or a
#      snapshot.debian.org archive URL, once Debian's archive has moved on);
#      GDRA_NVIDIA_DEBIAN_URI replaces http://deb.debian.org/debian for apt.
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "$0")/cluster/lib.sh"
# Progress goes to stderr: stdout is the roots only.
log() { say "$@" >&2; }
PATH=$PATH:/usr/sbin:/sbin

NVIDIA_VERSION=535.261.03
# package  version  pool path (in Debian's archive)  SHA256 of the .deb.
# Debian 12 (bookworm) non-free; nvidia-persistenced is built from its own
# source in contrib and lags the driver (any >= 535 works with it).
PINNED=(
  "libnvidia-ml1 535.261.03-1 pool/non-free/n/nvidia-graphics-drivers/libnvidia-ml1_535.261.03-1_amd64.deb c729da6ab729309dc3f481fe4d38f04ea03b0793154b0962b60117d2f37d082e"
  "libcuda1 535.261.03-1 pool/non-free/n/nvidia-graphics-drivers/libcuda1_535.261.03-1_amd64.deb de1e9ca34164a5983b3f752e6699cf1ad924790f1a843b7d582bab6f99206e1e"
  "libnvidia-ptxjitcompiler1 535.261.03-1 pool/non-free/n/nvidia-graphics-drivers/libnvidia-ptxjitcompiler1_535.261.03-1_amd64.deb 4e03bb994324a81d1a39d1e3eb0fed3f7f3c31a2b606a6e9110300de4f4fa1a0"
  "libnvidia-cfg1 535.261.03-1 pool/non-free/n/nvidia-graphics-drivers/libnvidia-cfg1_535.261.03-1_amd64.deb a28c8932ee02bcc860d8ab0cdde184339526a4515b476fabfb95190febe32fef"
  "nvidia-smi 535.261.03-1 pool/non-free/n/nvidia-graphics-drivers/nvidia-smi_535.261.03-1_amd64.deb 9b4392fa97957603d96f3cf1141fe78d871f5bcdd2e6bf810bce278cc14cb6d4"
  "nvidia-cuda-mps 535.261.03-1 pool/non-free/n/nvidia-graphics-drivers/nvidia-cuda-mps_535.261.03-1_amd64.deb 1341544805aa9c839af45bac5a4bd697cb3eb43105eec439bfba60a8e13ba35a"
  "nvidia-persistenced 535.171.04-1~deb12u1 pool/contrib/n/nvidia-persistenced/nvidia-persistenced_535.171.04-1~deb12u1_amd64.deb b7edec2139b799211f133f817fb2af9da93490336073fa7aff21a09beb15ac7d"
)
DEBIAN_URI=${GDRA_NVIDIA_DEBIAN_URI:-http://deb.debian.org/debian}
TRIPLET=x86_64-linux-gnu

NV=$CACHE/nvidia
DIR=$NV/$NVIDIA_VERSION
DEBS=$DIR/debs
APT=$NV/apt

print_root=
case ${1:-} in
  "") ;;
  --print-root)
    case ${2:-} in host|operator) print_root=$2 ;; *) die "--print-root takes host or operator" ;; esac ;;
  -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  *) die "unknown argument $1 (try --help)" ;;
esac

print() {
  if [ -n "$print_root" ]; then echo "$DIR/$print_root"; else echo "host $DIR/host"; echo "operator $DIR/operator"; fi
}

# Fast path: both roots built (the stamp is written last).
if [ -f "$DIR/host/.gdra-complete" ] && [ -f "$DIR/operator/.gdra-complete" ]; then print; exit 0; fi

for c in apt-get dpkg ldconfig flock sha256sum realpath; do
  command -v "$c" >/dev/null || die "$c not found: this script needs a Debian or Ubuntu host"
done
[ -r /usr/share/keyrings/debian-archive-keyring.gpg ] || [ -n "${GDRA_NVIDIA_DEB_BASE:-}" ] ||
  die "/usr/share/keyrings/debian-archive-keyring.gpg missing (apt-get install debian-archive-keyring)"
mkdir -p "$NV"
exec 8>"$NV/.lock"
flock 8
if [ -f "$DIR/host/.gdra-complete" ] && [ -f "$DIR/operator/.gdra-complete" ]; then print; exit 0; fi

deb_file() { echo "$DEBS/$(basename "$1")"; }
deb_ok() { [ -f "$1" ] && echo "$2  $1" | sha256sum --check --status; }

fetch_debs() {
  local line pkg ver path sum f missing=()
  mkdir -p "$DEBS"
  for line in "${PINNED[@]}"; do
    read -r pkg ver path sum <<<"$line"
    f=$(deb_file "$path")
    deb_ok "$f" "$sum" || { rm -f "$f"; missing+=("$pkg=$ver"); }
  done
  [ ${#missing[@]} -eq 0 ] && return
  if [ -n "${GDRA_NVIDIA_DEB_BASE:-}" ]; then
    log "downloading ${#missing[@]} NVIDIA packages from $GDRA_NVIDIA_DEB_BASE"
    for line in "${PINNED[@]}"; do
      read -r pkg ver path sum <<<"$line"
      f=$(deb_file "$path")
      if [ ! -f "$f" ]; then
        curl -fsSL --retry 3 -o "$f.part" "$GDRA_NVIDIA_DEB_BASE/$path" || die "download $GDRA_NVIDIA_DEB_BASE/$path failed"
        mv "$f.part" "$f"
      fi
    done
  else
    log "downloading ${#missing[@]} NVIDIA packages (${missing[*]}) with a private apt configuration in $APT"
    mkdir -p "$APT"
    # contrib and non-free only: apt-get download resolves no dependencies.
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_URI bookworm contrib non-free" > "$APT/sources.list"
    apt_private "$APT" apt-get update || die "apt-get update (private configuration in $APT) failed"
    (cd "$DEBS" && apt_private "$APT" apt-get download "${missing[@]}") || die "apt-get download ${missing[*]} failed: if Debian's archive no longer has these versions, set GDRA_NVIDIA_DEB_BASE to a mirror or snapshot that does (e.g. https://snapshot.debian.org/archive/debian/<timestamp>)"
  fi
  for line in "${PINNED[@]}"; do
    read -r pkg ver path sum <<<"$line"
    f=$(deb_file "$path")
    [ -f "$f" ] || die "$pkg $ver: $f missing after download"
    deb_ok "$f" "$sum" || { echo "$pkg $ver: SHA256 $(sha256sum "$f" | cut -d' ' -f1), pinned $sum" >&2; rm -f "$f"; die "checksum mismatch for $f"; }
  done
  log "checksums of ${#PINNED[@]} packages verified"
}

unpack_all() {
  local root=$1 line pkg ver path sum
  for line in "${PINNED[@]}"; do
    read -r pkg ver path sum <<<"$line"
    dpkg -x "$(deb_file "$path")" "$root"
  done
}

# ld_conf ROOT writes the multiarch ld.so.conf Debian and Ubuntu ship, inside ROOT.
ld_conf() {
  mkdir -p "$1/etc/ld.so.conf.d" "$1/var/cache/ldconfig"
  echo 'include /etc/ld.so.conf.d/*.conf' > "$1/etc/ld.so.conf"
  printf '# Multiarch support\n/usr/local/lib/%s\n/lib/%s\n/usr/lib/%s\n' "$TRIPLET" "$TRIPLET" "$TRIPLET" > "$1/etc/ld.so.conf.d/$TRIPLET.conf"
}

# ld_cache ROOT generates ROOT/etc/ld.so.cache from ROOT's own ld.so.conf
# (ldconfig chroots into ROOT; -X leaves the links as unpacked).
ld_cache() {
  if [ "$(id -u)" = 0 ]; then
    ldconfig -X -r "$1"
  else
    unshare --user --map-root-user ldconfig -X -r "$1"
  fi
  [ -s "$1/etc/ld.so.cache" ] || die "ldconfig wrote no $1/etc/ld.so.cache"
}

# alt ROOT LINK TARGET NAME: LINK -> /etc/alternatives/NAME -> TARGET, the chain
# update-alternatives builds for nvidia-alternative's slaves, with relative links.
alt() {
  local root=$1 link=$2 target=$3 name=$4
  mkdir -p "$root/etc/alternatives" "$root/$(dirname "$link")"
  ln -sfn "$(realpath -m --relative-to="/etc/alternatives" "$target")" "$root/etc/alternatives/$name"
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "/etc/alternatives/$name")" "$root/$link"
}

build_host() {
  local root=$1 cur=/usr/lib/$TRIPLET/nvidia/current
  unpack_all "$root"
  # nvidia-alternative's postinst: master /usr/lib/nvidia/nvidia -> /usr/lib/nvidia/current.
  alt "$root" /usr/lib/nvidia/nvidia /usr/lib/nvidia/current nvidia
  local l
  for l in libcuda.so.1 libcuda.so libnvidia-ml.so.1 libnvidia-ptxjitcompiler.so.1; do
    alt "$root" "/usr/lib/$TRIPLET/$l" "$cur/$l" "nvidia--$l-$TRIPLET"
  done
  alt "$root" "/usr/lib/$TRIPLET/nvidia/libnvidia-cfg.so.1" "$cur/libnvidia-cfg.so.1" "nvidia--libnvidia-cfg.so.1-$TRIPLET"
  alt "$root" /usr/bin/nvidia-smi /usr/lib/nvidia/current/nvidia-smi nvidia--nvidia-smi
  ld_conf "$root"
  ld_cache "$root"
}

build_operator() {
  local root=$1 stage=$1.unpacked lib f b
  unpack_all "$stage"
  lib=$root/usr/lib/$TRIPLET
  mkdir -p "$lib" "$root/usr/bin"
  # The driver container's installer: each library once, under its full
  # version, with its soname link (and libcuda.so) next to it.
  for f in "$stage/usr/lib/$TRIPLET/nvidia/current/"*.so.*; do
    b=$(basename "$f")
    if [ -L "$f" ]; then
      [[ $b == *.so.1 ]] && ln -sfn "$(readlink "$f")" "$lib/$b"
    else
      cp -a "$f" "$lib/$b"
    fi
  done
  ln -sfn libcuda.so.1 "$lib/libcuda.so"
  cp -a "$stage/usr/lib/nvidia/current/nvidia-smi" "$stage/usr/bin/nvidia-cuda-mps-control" \
    "$stage/usr/sbin/nvidia-cuda-mps-server" "$stage/usr/bin/nvidia-persistenced" "$root/usr/bin/"
  rm -rf "$stage"
  ld_conf "$root"
  ld_cache "$root"
}

fetch_debs
s=$(now)
for layout in host operator; do
  [ -f "$DIR/$layout/.gdra-complete" ] && continue
  tmp=$DIR/.$layout.tmp
  rm -rf "$tmp" "$tmp.unpacked"
  mkdir -p "$tmp"
  "build_$layout" "$tmp"
  echo "NVIDIA userspace $NVIDIA_VERSION, $layout layout, built by hack/nvidia-userspace.sh" > "$tmp/.gdra-complete"
  rm -rf "${DIR:?}/$layout"
  mv "$tmp" "$DIR/$layout"
done
log "NVIDIA userspace $NVIDIA_VERSION driver roots built in $(since "$s")s"
print
