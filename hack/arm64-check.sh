#!/usr/bin/env bash
# arm64 without an arm64 machine (issue 41): cross-builds the plugin for
# linux/arm64 with Debian's gcc-aarch64-linux-gnu, runs it under
# qemu-user-static and checks that it publishes, byte for byte, the
# ResourceSlices the amd64 plugin publishes for the same simulated node:
# a Grace Hopper node (gh200x1: MIG mode off, on, and without dynamic MIG)
# and an eight-H100 node (h100x8); runs the offline demo (claims prepared and
# unprepared over the kubelet gRPC API) with the arm64 gpudra and the arm64
# nvidia-cdi-hook's create-symlinks and chmod on a container root, each
# compared with amd64. Then, on NVIDIA's arm64 R535 libnvidia-ml
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

say "build the arm64 plugin, gpudra and nvidia-cdi-hook (cgo, aarch64-linux-gnu-gcc) into $BIN_DIR/linux-arm64/"
BIN_DIR=$BIN_DIR hack/build-arch.sh arm64 plugin gpudra hook >/dev/null
arm=$BIN_DIR/linux-arm64/gpu-kubelet-plugin arm_gpudra=$BIN_DIR/linux-arm64/gpudra arm_hook=$BIN_DIR/linux-arm64/nvidia-cdi-hook
# ELF e_machine (bytes 18-19, little endian): 0xb7 is AArch64, 0x3e x86-64.
machine() { od -An -tx1 -j18 -N2 "$1" | tr -d ' \n'; }
for b in "$arm" "$arm_gpudra" "$arm_hook"; do [ "$(machine "$b")" = b700 ] || fail "$b is not an AArch64 ELF binary"; done

say "build the amd64 ones (as make build does; cached after it) and the nvidia-smi stand-in"
export CGO_ENABLED=1 CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}
export GOOS=linux GOARCH=amd64
$GO build -tags "${GO_TAGS:-grpcnotrace}" -o "$work/plugin-amd64" ./cmd/gpu-kubelet-plugin
$GO build -tags "${GO_TAGS:-grpcnotrace}" -o "$work/gpudra-amd64" ./cmd/gpudra
GOBIN=$work $GO install -trimpath -ldflags "-s -w" \
  "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@$($GO list -m -f '{{.Version}}' github.com/NVIDIA/nvidia-container-toolkit)"
CGO_ENABLED=0 $GO build -tags "${GO_TAGS:-grpcnotrace}" -o "$work/nvidia-smi-sim" ./cmd/nvidia-smi-sim
unset GOOS GOARCH
amd=$work/plugin-amd64 amd_gpudra=$work/gpudra-amd64 amd_hook=$work/nvidia-cdi-hook
for b in "$amd" "$amd_gpudra" "$amd_hook"; do [ "$(machine "$b")" = 3e00 ] || fail "$b is not an x86-64 ELF binary"; done

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

# The offline demo (make demo-offline): the plugin in process, claims
# allocated by the scheduler's allocator and prepared and unprepared over the
# kubelet gRPC API, MIG devices created and deleted, CDI specs written and
# removed. Both gpudra builds run the amd64 nvidia-smi stand-in "in the
# containers": qemu-user cannot exec an arm64 child without binfmt_misc.
for p in gh200x1 h100x8; do
  say "offline demo $p: amd64 and arm64 (qemu) gpudra demo"
  "$amd_gpudra" demo --simulate "$p" --nvidia-smi-stub "$work/nvidia-smi-sim" >"$work/demo-$p.amd64" 2>&1 || { tail -n 20 "$work/demo-$p.amd64" >&2; fail "amd64 demo $p failed"; }
  "$QEMU" -L "$SYSROOT" "$arm_gpudra" demo --simulate "$p" --nvidia-smi-stub "$work/nvidia-smi-sim" >"$work/demo-$p.arm64" 2>&1 || { tail -n 20 "$work/demo-$p.arm64" >&2; fail "arm64 demo $p failed"; }
  for a in amd64 arm64; do
    # Without klog lines and the time to publish.
    grep -vE '^[IWE][0-9]{4} ' "$work/demo-$p.$a" | sed -E 's/published [0-9]+ms after/published after/' > "$work/demo-$p.$a.norm"
    grep -q '^==> Left behind: 0 CDI specs, 0 checkpoint records, 0 MIG instances' "$work/demo-$p.$a.norm" || fail "$a demo $p left something behind"
    grep -qE '^==> Unpreparing [1-9][0-9]* claims' "$work/demo-$p.$a.norm" || fail "$a demo $p prepared no claim"
  done
  if ! cmp -s "$work/demo-$p.amd64.norm" "$work/demo-$p.arm64.norm"; then
    diff -u "$work/demo-$p.amd64.norm" "$work/demo-$p.arm64.norm" >&2 || true
    fail "demo $p: the arm64 gpudra's story differs from the amd64 one's"
  fi
  echo "   identical: $(grep -E '^==> (Unpreparing|MIG instances)' "$work/demo-$p.arm64.norm" | tr '\n' ' ')"
done

# nvidia-cdi-hook, which the plugin installs on the host and names in CDI
# specs: the arm64 build knows every subcommand the specs use and, run as an
# OCI hook (container state on stdin, the bundle's config.json naming the
# root), makes the same changes in a container root as the amd64 build.
say "nvidia-cdi-hook: amd64 and arm64 (qemu): subcommands, create-symlinks and chmod in a container root"
for sub in update-ldcache create-symlinks chmod enable-cuda-compat disable-device-node-modification; do
  help=$("$QEMU" -L "$SYSROOT" "$arm_hook" "$sub" --help 2>&1) || fail "the arm64 nvidia-cdi-hook: $sub --help failed: $help"
  grep -q "^ *NVIDIA CDI Hook $sub - " <<<"$help" || fail "the arm64 nvidia-cdi-hook does not know $sub: $help"
done
hook_run() { # ARCH: the hooks on a fresh bundle; prints the root's tree
  local arch=$1 b=$work/bundle-$1 cmd=("$amd_hook")
  [ "$arch" = arm64 ] && cmd=("$QEMU" -L "$SYSROOT" "$arm_hook")
  mkdir -p "$b/rootfs/usr/lib/TRIPLET" "$b/rootfs/dev/dri"
  : > "$b/rootfs/usr/lib/TRIPLET/libcuda.so.1"; chmod 0700 "$b/rootfs/dev/dri"
  printf '{"ociVersion":"1.2.0","root":{"path":"rootfs"}}' > "$b/config.json"
  local state
  state=$(printf '{"ociVersion":"1.2.0","id":"arm64-check","status":"creating","pid":%s,"bundle":"%s"}' $$ "$b")
  "${cmd[@]}" create-symlinks --link libcuda.so.1::/usr/lib/TRIPLET/libcuda.so --link ../lib/TRIPLET/libcuda.so.1::/usr/lib64/libcuda.so.1 <<<"$state" >"$work/hook-$arch.log" 2>&1 ||
    { cat "$work/hook-$arch.log" >&2; fail "$arch nvidia-cdi-hook create-symlinks failed"; }
  "${cmd[@]}" chmod --mode 755 --path /dev/dri <<<"$state" >>"$work/hook-$arch.log" 2>&1 ||
    { cat "$work/hook-$arch.log" >&2; fail "$arch nvidia-cdi-hook chmod failed"; }
  (cd "$b/rootfs" && find . -printf '%p %y %m %l\n' | sort)
}
hook_run amd64 > "$work/hook-tree.amd64"
hook_run arm64 > "$work/hook-tree.arm64"
grep -q '^./usr/lib/TRIPLET/libcuda.so l 777 libcuda.so.1$' "$work/hook-tree.arm64" || { cat "$work/hook-tree.arm64" >&2; fail "the arm64 hook made no libcuda.so link"; }
grep -q '^./dev/dri d 755 $' "$work/hook-tree.arm64" || { cat "$work/hook-tree.arm64" >&2; fail "the arm64 hook did not chmod /dev/dri"; }
cmp -s "$work/hook-tree.amd64" "$work/hook-tree.arm64" || { diff -u "$work/hook-tree.amd64" "$work/hook-tree.arm64" >&2 || true; fail "the hooks changed the container roots differently"; }
echo "   identical container roots after create-symlinks and chmod ($(wc -l < "$work/hook-tree.arm64") entries)"

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
    mkdir -p "$d"; : > "$d/log"
    "${cmd[@]}" --node-name arm64-check --kubeconfig "$work/kubeconfig" --kubelet-dir "$d/kubelet" --cdi-root "$d/cdi" \
      --http-endpoint 127.0.0.1:0 --driver-root "$root" --nvml-retry-interval 5ms --nvml-retry-max-interval 20ms >"$d/log" 2>&1 &
    pid=$!
    for i in $(seq 100); do
      addr=$(sed -n 's/.*"Serving metrics and liveness" address="\([^"]*\)".*/\1/p' "$d/log" || true)
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
say "PASS: arm64 under qemu as amd64: slices (${#cases[@]} nodes), offline demo (prepare/unprepare), nvidia-cdi-hook, NVML wait without a kernel module"
