#!/usr/bin/env bash
# arm64 without an arm64 machine (issue 41): cross-builds the plugin for
# linux/arm64 with Debian's gcc-aarch64-linux-gnu, runs it under
# qemu-user-static and checks that it publishes, byte for byte, the
# ResourceSlices the amd64 plugin publishes for the same simulated node:
# a Grace Hopper node (gh200x1: MIG mode off, on, and without dynamic MIG)
# and an eight-H100 node (h100x8).
#
# qemu is invoked explicitly (qemu-aarch64-static -L /usr/aarch64-linux-gnu
# BINARY), so no binfmt_misc registration is needed: CI containers usually
# cannot register one.
#
# Needs: apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
# Usage: hack/arm64-check.sh          (make arm64-check; .ci/run runs it)
# Env:   BIN_DIR (default bin): the arm64 plugin is built into BIN_DIR/linux-arm64/.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN_DIR=${BIN_DIR:-bin}
QEMU=${QEMU:-qemu-aarch64-static}
SYSROOT=${ARM64_SYSROOT:-/usr/aarch64-linux-gnu}
t0=$(date +%s)
say() { echo "== [$(( $(date +%s) - t0 ))s] $*"; }
fail() { echo "arm64-check: FAIL: $*" >&2; exit 1; }

missing=
for c in aarch64-linux-gnu-gcc "$QEMU"; do command -v "$c" >/dev/null || missing="$missing $c"; done
[ -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ] || missing="$missing $SYSROOT/lib/ld-linux-aarch64.so.1"
[ -z "$missing" ] || fail "missing:$missing (apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

say "build the arm64 plugin (cgo, aarch64-linux-gnu-gcc) into $BIN_DIR/linux-arm64/"
BIN_DIR=$BIN_DIR hack/build-arch.sh arm64 plugin >/dev/null
arm=$BIN_DIR/linux-arm64/gpu-kubelet-plugin
# ELF e_machine (bytes 18-19, little endian): 0xb7 is AArch64, 0x3e x86-64.
[ "$(od -An -tx1 -j18 -N2 "$arm" | tr -d ' \n')" = b700 ] || fail "$arm is not an AArch64 ELF binary"

say "build the amd64 plugin (as make build does; cached after it)"
export CGO_ENABLED=1 CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}
GOOS=linux GOARCH=amd64 $GO build -tags "${GO_TAGS:-grpcnotrace}" -o "$work/plugin-amd64" ./cmd/gpu-kubelet-plugin
amd=$work/plugin-amd64
[ "$(od -An -tx1 -j18 -N2 "$amd" | tr -d ' \n')" = 3e00 ] || fail "$amd is not an x86-64 ELF binary"

# print ARCH NAME ARGS...: the slices of one simulated node, stdout to
# $work/NAME.ARCH.yaml, stderr to $work/NAME.ARCH.log.
print() {
  local arch=$1 name=$2; shift 2
  local cmd=("$amd")
  [ "$arch" = arm64 ] && cmd=("$QEMU" -L "$SYSROOT" "$arm")
  if ! "${cmd[@]}" --node-name arm64-check --print-slices "$@" >"$work/$name.$arch.yaml" 2>"$work/$name.$arch.log"; then
    tail -n 20 "$work/$name.$arch.log" >&2
    fail "$arch plugin $* failed"
  fi
}

# name | plugin arguments | a line the slices must contain
cases=(
  "gh200x1|--simulate gh200x1|string: NVIDIA GH200 480GB"
  "gh200x1-mig|--simulate gh200x1:mig|string: 7g.96gb"
  "gh200x1-static|--simulate gh200x1:mig --feature-gates=DynamicMIG=false|string: NVIDIA GH200 480GB"
  "h100x8|--simulate h100x8|string: NVIDIA H100 80GB HBM3"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name args want <<<"$c"
  say "$name: amd64 and arm64 (qemu) plugin --print-slices $args"
  # shellcheck disable=SC2086 # args are words
  print amd64 "$name" $args
  # shellcheck disable=SC2086
  print arm64 "$name" $args
  a=$work/$name.amd64.yaml b=$work/$name.arm64.yaml
  grep -qF -- "$want" "$a" || fail "$name: the amd64 slices lack \"$want\""
  n=$(grep -c '^kind: ResourceSlice' "$a" || true)
  [ "$n" -gt 0 ] || fail "$name: no ResourceSlice printed"
  if ! cmp -s "$a" "$b"; then
    diff -u "$a" "$b" | head -n 40 >&2
    fail "$name: the arm64 plugin's slices differ from the amd64 plugin's"
  fi
  echo "   identical: $n ResourceSlices, $(grep -c '^  - attributes:' "$a" || true) devices, $(wc -c <"$a") bytes, sha256 $(sha256sum "$a" | cut -c1-16)"
done

# The comparison must be able to fail: two different nodes differ.
cmp -s "$work/gh200x1.arm64.yaml" "$work/h100x8.amd64.yaml" && fail "cmp found gh200x1 and h100x8 identical: the comparison proves nothing"

say "PASS: the arm64 plugin under qemu publishes the same slices as the amd64 plugin (${#cases[@]} nodes)"
