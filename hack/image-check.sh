#!/usr/bin/env bash
# Checks a driver image tarball (OCI layout) that `make image` wrote:
#   - every blob's SHA-256 is its name, every descriptor's size its blob's;
#   - index.json names one image index with a linux/amd64 and a linux/arm64
#     manifest (a single amd64 manifest with ONE_PLATFORM=1);
#   - each platform's layer holds the plugin, the webhook, nvidia-smi-sim,
#     nvidia-cdi-hook and its .sha256, built for that platform, and the glibc
#     loader they name;
#   - each platform's plugin runs from the layer, with the layer's own glibc
#     (arm64 under qemu-aarch64-static -L LAYER), and prints the same slices
#     for gh200x1.
# Usage: hack/image-check.sh [TARBALL]   (default: the cache's driver-multiarch.oci.tar)
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "$0")/cluster/lib.sh"
tarball=${1:-$CACHE/images/driver-multiarch.oci.tar}
QEMU=${QEMU:-qemu-aarch64-static}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
fail() { echo "image-check: FAIL: $*" >&2; exit 1; }
tar -xf "$tarball" -C "$w"
[ -f "$w/oci-layout" ] && [ -f "$w/index.json" ] || fail "$tarball: no OCI layout"
for f in "$w"/blobs/sha256/*; do
  [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$(basename "$f")" ] || fail "blob $(basename "$f"): digest mismatch"
done
# descs FILE: "MEDIATYPE DIGEST SIZE" per descriptor (as images.sh writes them).
descs() {
  grep -oE '"mediaType":"[^"]+","digest":"sha256:[0-9a-f]{64}","size":[0-9]+' "$1" |
    sed -E 's/"mediaType":"([^"]+)","digest":"sha256:([0-9a-f]{64})","size":([0-9]+)/\1 \2 \3/'
}
checked() { # DIGEST SIZE
  [ -f "$w/blobs/sha256/$1" ] || fail "blob $1 missing"
  [ "$(stat -c %s "$w/blobs/sha256/$1")" = "$2" ] || fail "blob $1: size $(stat -c %s "$w/blobs/sha256/$1"), descriptor says $2"
}
read -r mt top size < <(descs "$w/index.json" | head -1)
checked "$top" "$size"
grep -q '"io.containerd.image.name":"localhost/gpu-dra-driver:' "$w/index.json" || fail "index.json names no localhost/gpu-dra-driver image"
if [ "$mt" = application/vnd.oci.image.index.v1+json ]; then
  list=$w/blobs/sha256/$top
else
  [ "${ONE_PLATFORM:-}" = 1 ] || fail "index.json names a single manifest, want an image index (ONE_PLATFORM=1 for the cluster's amd64 tarball)"
  list=$w/index.json
fi
grep -q '"platform":{"architecture":"amd64","os":"linux"}' "$list" || fail "no linux/amd64 manifest"
[ "${ONE_PLATFORM:-}" = 1 ] || grep -q '"platform":{"architecture":"arm64","os":"linux","variant":"v8"}' "$list" || fail "no linux/arm64/v8 manifest"

out=()
while read -r mt digest size; do
  [ "$mt" = application/vnd.oci.image.manifest.v1+json ] || continue
  checked "$digest" "$size"
  m=$w/blobs/sha256/$digest
  mapfile -t parts < <(descs "$m")
  read -r _ cfg csize <<<"${parts[0]}"; checked "$cfg" "$csize"
  read -r _ layer lsize <<<"${parts[1]}"; checked "$layer" "$lsize"
  arch=$(grep -oE '"architecture":"[a-z0-9]+"' "$w/blobs/sha256/$cfg" | cut -d'"' -f4)
  grep -q "\"diff_ids\":\[\"sha256:$layer\"\]" "$w/blobs/sha256/$cfg" || fail "$arch: config's diff_id is not the layer"
  r=$w/rootfs-$arch; mkdir -p "$r"; tar -xf "$w/blobs/sha256/$layer" -C "$r"
  case $arch in amd64) mach=3e00 ld=lib64/ld-linux-x86-64.so.2 ;; arm64) mach=b700 ld=lib/ld-linux-aarch64.so.1 ;; *) fail "unexpected architecture $arch" ;; esac
  for b in gpu-kubelet-plugin gpu-dra-webhook nvidia-smi-sim nvidia-cdi-hook; do
    [ -f "$r/usr/bin/$b" ] || fail "$arch: usr/bin/$b missing"
    [ "$(od -An -tx1 -j18 -N2 "$r/usr/bin/$b" | tr -d ' \n')" = "$mach" ] || fail "$arch: usr/bin/$b is built for another machine"
  done
  (cd "$r/usr/bin" && sha256sum --check --status nvidia-cdi-hook.sha256) || fail "$arch: nvidia-cdi-hook.sha256 does not match"
  [ -e "$r/$ld" ] || fail "$arch: loader /$ld missing"
  if [ "$arch" = arm64 ]; then
    run=("$QEMU" -L "$r" "$r/usr/bin/gpu-kubelet-plugin")
  else
    run=("$r/$ld" --library-path "$r/lib/x86_64-linux-gnu" "$r/usr/bin/gpu-kubelet-plugin")
  fi
  "${run[@]}" --simulate gh200x1 --node-name image-check --print-slices > "$w/slices-$arch.yaml" 2>"$w/log-$arch" || { tail -5 "$w/log-$arch" >&2; fail "$arch: the layer's plugin did not run"; }
  grep -q 'NVIDIA GH200 480GB' "$w/slices-$arch.yaml" || fail "$arch: no GH200 in the slices"
  echo "   $arch: manifest ${digest:0:12}, layer $((lsize / 1048576)) MiB, plugin runs with the layer's glibc"
  out+=("$arch")
done < <(descs "$list")
if [ ${#out[@]} -gt 1 ]; then
  cmp -s "$w/slices-amd64.yaml" "$w/slices-arm64.yaml" || fail "the platforms' plugins print different slices"
fi
echo "image-check: PASS: $tarball (${out[*]})"
