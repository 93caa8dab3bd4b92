#!/usr/bin/env bash
# arm64 without an arm64 machine (issue 41): cross-builds the plugin for
# linux/arm64 with Debian's gcc-aarch64-linux-gnu, runs it under
# qemu-user-static and checks that it publishes, byte for byte, the
# ResourceSlices the amd64 plugin publishes for the same simulated node:
# a Grace Hopper node (gh200x1: MIG mode off, on, and without dynamic MIG)
# and an eight-H100 node (h100x8). Then, on NVIDIA's arm64 R535 libnvidia-ml
# and no kernel module, the arm64 plugin stays up, not ready, and logs the
# same "Driver Not Loaded" wait as the amd64 plugin on the amd64 library.
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
    diff -u "$a" "$b" > "$work/$name.diff" || true
    head -n 40 "$work/$name.diff" >&2
    fail "$name: the arm64 plugin's slices differ from the amd64 plugin's"
  fi
  echo "   identical: $n ResourceSlices, $(grep -c '^  - attributes:' "$a" || true) devices, $(wc -c <"$a") bytes, sha256 $(sha256sum "$a" | cut -c1-16)"
done

# The comparison must be able to fail: two different nodes differ.
cmp -s "$work/gh200x1.arm64.yaml" "$work/h100x8.amd64.yaml" && fail "cmp found gh200x1 and h100x8 identical: the comparison proves nothing"

say "the arm64 plugin under qemu publishes the same slices as the amd64 plugin (${#cases[@]} nodes)"

# NVIDIA's arm64 R535 libnvidia-ml (hack/nvidia-ml-arm64.sh, pinned and
# checksummed like hack/nvidia-userspace.sh's amd64 packages) and no kernel
# module: nvmlInit fails with DRIVER_NOT_LOADED. The arm64 plugin must stay
# up, live, not ready, and log the same one "Waiting for NVML" line as the
# amd64 plugin on the amd64 library (TestWaitsForNVMLWithNVIDIAsLibrary).
if [ -e /proc/driver/nvidia/version ]; then
  say "SKIP the NVML wait: this machine has the NVIDIA kernel module loaded"
else
  say "NVIDIA's R535 libnvidia-ml, arm64 and amd64 (pinned, checksummed; cached after the first run)"
  root_arm=$(hack/nvidia-ml-arm64.sh)
  root_amd=$(hack/nvidia-userspace.sh --print-root host)
  # A kubeconfig for an API server that is not there: the plugin's Node
  # events fail; waiting for NVML needs no API.
  printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: none\n  cluster: {server: "https://127.0.0.1:9"}\ncontexts:\n- name: none\n  context: {cluster: none, user: none}\ncurrent-context: none\nusers:\n- name: none\n  user: {token: none}\n' > "$work/kubeconfig"
  # get ADDR PATH: "STATUS BODY" over bash's /dev/tcp (no curl needed).
  get() {
    local resp
    exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$2" >&3
    resp=$(cat <&3); exec 3<&-
    printf '%s %s\n' "$(head -n1 <<<"$resp" | cut -d' ' -f2)" "$(sed '1,/^\r\{0,1\}$/d' <<<"$resp")"
  }
  # wait_nvml ARCH ROOT: start the plugin on ROOT, check its probes while it
  # waits, stop it; the normalized log line goes to $work/nvml.ARCH.
  wait_nvml() {
    local arch=$1 root=$2 d=$work/nvml-$1 cmd=("$amd") pid addr= i ready live
    [ "$arch" = arm64 ] && cmd=("$QEMU" -L "$SYSROOT" "$arm")
    mkdir -p "$d"
    "${cmd[@]}" --node-name arm64-check --kubeconfig "$work/kubeconfig" --kubelet-dir "$d/kubelet" --cdi-root "$d/cdi" \
      --http-endpoint 127.0.0.1:0 --driver-root "$root" --nvml-retry-interval 5ms --nvml-retry-max-interval 20ms >"$d/log" 2>&1 &
    pid=$!
    for i in $(seq 100); do
      addr=$(sed -n 's/.*"Serving metrics and liveness" address="\([^"]*\)".*/\1/p' "$d/log")
      [ -n "$addr" ] && grep -q '"Waiting for NVML' "$d/log" && break
      kill -0 "$pid" 2>/dev/null || { tail -n 20 "$d/log" >&2; fail "$arch plugin exited while waiting for NVML"; }
      sleep 0.2
    done
    [ -n "$addr" ] || { kill "$pid"; tail -n 20 "$d/log" >&2; fail "$arch plugin: no probe address or no wait in its log"; }
    sleep 1 # a few dozen retries
    ready=$(get "$addr" /readyz) live=$(get "$addr" /healthz)
    kill -0 "$pid" 2>/dev/null || fail "$arch plugin exited while waiting for NVML"
    kill -TERM "$pid"; wait "$pid" || true
    [[ $live == 200* ]] || fail "$arch /healthz while waiting for NVML: $live, want 200"
    [[ $ready == 503* && $ready == *"Driver Not Loaded"* && $ready == *"kernel module"* && $ready == *libnvidia-ml.so.535* ]] ||
      fail "$arch /readyz while waiting for NVML: $ready, want 503 naming the library and the missing driver"
    [ "$(grep -c '"Waiting for NVML' "$d/log")" = 1 ] || { cat "$d/log" >&2; fail "$arch: want one \"Waiting for NVML\" log line"; }
    grep -q 'Driver Not Loaded (ERROR_DRIVER_NOT_LOADED)' "$d/log" || fail "$arch: the log does not say Driver Not Loaded"
    # Without klog's header (time, pid), the root and the multiarch triplet.
    grep '"Waiting for NVML' "$d/log" | sed -E 's/^[IWE][0-9]{4} [0-9:.]+ +[0-9]+ //' |
      sed -e "s#$root#ROOT#g" -E -e 's#(x86_64|aarch64)-linux-gnu#TRIPLET#g' > "$work/nvml.$arch"
    echo "   $arch: /healthz 200, /readyz ${ready:0:3}, $(grep -o 'Driver Not Loaded (ERROR_DRIVER_NOT_LOADED)' "$d/log" | head -1)"
  }
  say "amd64 plugin on the amd64 library, arm64 plugin (qemu) on the arm64 library, no kernel module"
  wait_nvml amd64 "$root_amd"
  wait_nvml arm64 "$root_arm"
  if ! cmp -s "$work/nvml.amd64" "$work/nvml.arm64"; then
    diff -u "$work/nvml.amd64" "$work/nvml.arm64" >&2
    fail "the arm64 plugin's NVML wait log differs from the amd64 plugin's"
  fi
  echo "   same log line: $(cut -c1-150 "$work/nvml.arm64")..."
fi
say "PASS: arm64 plugin under qemu: same slices as amd64 (${#cases[@]} nodes), same NVML wait without a kernel module"
