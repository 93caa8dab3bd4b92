#!/usr/bin/env bash
# make gpu-smoke: a read-only check of a real GPU host, without a cluster.
#
#   1. the plugin's --print-slices against the real NVML, compared with
#      nvidia-smi --query-gpu (uuid, name, memory, PCI bus ID, driver version)
#      and, where the driver answers, nvidia-smi mig -lgip (MIG profile names
#      and IDs);
#   2. one whole-GPU claim prepared and unprepared through the plugin (its
#      kubelet gRPC API, an in-process API server stand-in, real nvcdi), with
#      the CDI spec checked: device nodes, mount sources and the hook exist,
#      and the hook knows every subcommand the spec uses;
#   3. MPS on GPU 0: a control daemon started the way the plugin's daemon
#      pods start it (the plugin's mps-control-daemon program, chrooted into
#      the driver root, compute mode untouched) in a temporary pipe
#      directory; a CUDA client (PyTorch) with a 2 GiB pinned-memory limit
#      must allocate 1 GiB and must fail to allocate 3 GiB; the daemon is
#      stopped with `quit`. Skipped without nvidia-cuda-mps-control in the
#      driver root, without PyTorch, or when GPU 0 is in MIG mode;
#   4. a container, the path a pod takes to its GPU without a container
#      runtime: one whole GPU prepared as in 2, its CDI devices applied to an
#      OCI runtime spec by the CDI library (device nodes with their cgroup
#      rules, driver library mounts, nvidia-cdi-hook create-symlinks and
#      update-ldcache), runc (built from its Go module) running
#      test/gpusmoke/probe/kernelprobe.c over Debian's libc
#      (hack/smoke-container.sh builds both into the cache). Inside, the
#      probe must see only the claimed GPU's /dev/nvidiaN (and the control
#      nodes), load libcuda by soname through the ld cache the hook wrote,
#      get cuInit 0, the claim's UUID from cuDeviceGetUuid, and run a PTX
#      kernel (JIT-compiled by the driver) whose result it checks. On
#      simulated GPUs (the tests) cuInit must give 100 and the rest is
#      skipped. Then an MPS claim of the same GPU (GpuConfig sharing MPS,
#      2048Mi pinned-memory limit): the plugin starts its control daemon
#      as a daemon pod would (gpudra smoke mps-daemon: a mount namespace
#      of its own with the daemon's directory at the driver root's /tmp and
#      its shm directory at /dev/shm, nvidia-cuda-mps-control chrooted into
#      the driver root, compute mode untouched); two containers at once
#      run the probe with the claim's CDI devices: each must see the
#      daemon's socket in the pipe directory and the claim's limit in its
#      environment, and on a GPU get cuInit 0, its UUID, the kernel,
#      allocate 1 GiB and be refused 3 GiB (on simulated GPUs cuInit must
#      give 805, CUDA_ERROR_MPS_CONNECTION_FAILED: the daemon's server
#      finds no GPU). Unprepared, the daemon must have got `quit` and left
#      no process. Without nvidia-cuda-mps-control in the driver root the
#      MPS rows are one SKIP. Rows "container: ..."; skipped without root;
#   5. the GPUs' settings compared before and after.
#
# It never changes MIG mode, compute mode, the time slice, persistence mode or
# clocks, and never resets a GPU: nvidia-smi is only queried, and the plugin
# runs with dynamic MIG off and with every NVML call that would change a GPU
# refused (the "no GPU setting changed" row lists any attempt).
#
# Overrides, for tests and unusual hosts:
#   GPU_SMOKE_PLUGIN        gpu-kubelet-plugin (default bin/gpu-kubelet-plugin)
#   GPU_SMOKE_GPUDRA        gpudra (default bin/gpudra)
#   GPU_SMOKE_HOOK          nvidia-cdi-hook to install and check (default bin/nvidia-cdi-hook)
#   GPU_SMOKE_NVIDIA_SMI    nvidia-smi (default: from PATH, else under the driver root)
#   GPU_SMOKE_DRIVER_ROOT   root of the driver installation (default /)
#   GPU_SMOKE_PLUGIN_ARGS   extra arguments for --print-slices (split on spaces)
#   GPU_SMOKE_PREPARE_ARGS  extra arguments for gpudra smoke prepare (split on spaces)
#   GPU_SMOKE_PYTHON        python with PyTorch for the MPS client (default python3)
#   GPU_SMOKE_CONTAINER     skip: leave out step 4
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

PLUGIN=${GPU_SMOKE_PLUGIN:-bin/gpu-kubelet-plugin}
GPUDRA=${GPU_SMOKE_GPUDRA:-bin/gpudra}
HOOK=${GPU_SMOKE_HOOK:-bin/nvidia-cdi-hook}
DRIVER_ROOT=${GPU_SMOKE_DRIVER_ROOT:-/}
SMI=${GPU_SMOKE_NVIDIA_SMI:-}
read -r -a PLUGIN_ARGS <<< "${GPU_SMOKE_PLUGIN_ARGS:-}"
read -r -a PREPARE_ARGS <<< "${GPU_SMOKE_PREPARE_ARGS:-}"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results

# row STATUS CHECK DETAIL
row() { printf '%s\t%s\t%s\n' "$1" "$2" "${3//$'\n'/ }" >> "$RESULTS"; }

# table prints the results and exits 1 when any check failed.
table() {
  local pass fail skip
  pass=$(grep -c '^PASS' "$RESULTS")
  fail=$(grep -c '^FAIL' "$RESULTS")
  skip=$(grep -c '^SKIP' "$RESULTS")
  echo
  awk -F'\t' '
    { st[NR]=$1; ck[NR]=$2; dt[NR]=$3; if (length($2) > w) w = length($2) }
    END {
      printf "%-6s %-*s %s\n", "RESULT", w, "CHECK", "DETAIL"
      for (i = 1; i <= NR; i++) printf "%-6s %-*s %s\n", st[i], w, ck[i], dt[i]
    }' "$RESULTS"
  echo
  echo "gpu-smoke: $pass passed, $fail failed, $skip skipped"
  [ "$fail" -eq 0 ]
  exit
}

# gather STEP COMMAND...: runs a gpudra smoke step and keeps its result lines;
# a step that fails without saying why is a failure of its own.
gather() {
  local step=$1 rc
  shift
  "$@" > "$WORK/step.out" 2> "$WORK/step.err"
  rc=$?
  grep -E $'^(PASS|FAIL|SKIP)\t' "$WORK/step.out" >> "$RESULTS"
  if [ "$rc" -ne 0 ] && ! grep -q '^FAIL' "$WORK/step.out"; then
    row FAIL "$step" "exit $rc: $(tail -n 3 "$WORK/step.err")"
  fi
}

# Preflight.
if [ -z "$SMI" ]; then
  SMI=$(command -v nvidia-smi || true)
  [ -n "$SMI" ] || SMI=$DRIVER_ROOT/usr/bin/nvidia-smi
fi
missing=0
for bin in "$PLUGIN" "$GPUDRA" "$HOOK" "$SMI"; do
  if [ ! -x "$bin" ]; then
    row FAIL "preflight" "$bin is missing or not executable (make build builds bin/)"
    missing=1
  fi
done
[ "$missing" -eq 0 ] || table

# settings: what must not change, as nvidia-smi sees it.
settings() {
  "$SMI" --query-gpu=index,uuid,mig.mode.current,mig.mode.pending,compute_mode,persistence_mode,clocks.applications.graphics,clocks.applications.memory,power.limit --format=csv,noheader 2>&1
  "$SMI" compute-policy -l 2>&1 || true
}
settings > "$WORK/settings.before"

# 1. Discovery against nvidia-smi.
if "$SMI" --query-gpu=index,uuid,name,memory.total,pci.bus_id,driver_version --format=csv,noheader,nounits > "$WORK/gpus.csv" 2> "$WORK/smi.err"; then
  row PASS "nvidia-smi --query-gpu" "$(wc -l < "$WORK/gpus.csv") GPUs"
else
  row FAIL "nvidia-smi --query-gpu" "$(cat "$WORK/smi.err" "$WORK/gpus.csv")"
  table
fi
if "$PLUGIN" --node-name gpu-smoke --driver-root "$DRIVER_ROOT" --print-slices "${PLUGIN_ARGS[@]}" > "$WORK/slices.yaml" 2> "$WORK/plugin.err"; then
  row PASS "plugin --print-slices" "$(grep -c '^kind: ResourceSlice' "$WORK/slices.yaml") ResourceSlices"
  "$SMI" mig -lgip > "$WORK/lgip.txt" 2>&1 || true
  gather "gpudra smoke compare" "$GPUDRA" smoke compare --slices "$WORK/slices.yaml" --gpus "$WORK/gpus.csv" --mig-profiles "$WORK/lgip.txt"
else
  row FAIL "plugin --print-slices" "$(tail -n 3 "$WORK/plugin.err")"
fi

# 2. One whole GPU through the plugin.
gather "gpudra smoke prepare" "$GPUDRA" smoke prepare --driver-root "$DRIVER_ROOT" --hook "$HOOK" "${PREPARE_ARGS[@]}"

# 3. MPS: does a client's pinned-memory limit bite? NVIDIA's tools run
# chrooted into the driver root, so the daemon's directories are made in it.
PYTHON=${GPU_SMOKE_PYTHON:-python3}

# The client: 1 GiB must fit under the limit, 3 GiB must not.
MPS_CLIENT='
import torch
def alloc(gib):
    try:
        x = torch.empty(gib << 30, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        del x
        torch.cuda.empty_cache()
        return "ok"
    except Exception as e:  # torch.cuda.OutOfMemoryError, or a CUDA error
        return "failed: " + str(e).splitlines()[0]
print("alloc 1GiB:", alloc(1))
print("alloc 3GiB:", alloc(3))
'

mps_step() {
  local found="" d uuid mig mps inroot pid i rc
  for d in usr/bin usr/sbin bin sbin usr/local/bin usr/local/nvidia/bin; do
    [ -e "$DRIVER_ROOT/$d/nvidia-cuda-mps-control" ] && found=1
  done
  if [ -z "$found" ]; then
    row SKIP "MPS" "no nvidia-cuda-mps-control in the driver root $DRIVER_ROOT"
    return
  fi
  if ! "$PYTHON" -c 'import torch' > /dev/null 2>&1; then
    row SKIP "MPS" "no PyTorch for the CUDA client ($PYTHON -c 'import torch' fails; set GPU_SMOKE_PYTHON)"
    return
  fi
  uuid=$(awk -F', ' 'NR == 1 { print $2 }' "$WORK/gpus.csv")
  mig=$(awk -F', ' 'NR == 1 { print $3 }' "$WORK/settings.before")
  if [ "$mig" = "Enabled" ]; then
    row SKIP "MPS" "GPU 0 is in MIG mode; the step does not change it"
    return
  fi
  mkdir -p "$DRIVER_ROOT/tmp"
  mps=$(mktemp -d "$DRIVER_ROOT/tmp/gpu-smoke-mps.XXXXXX")
  inroot=${mps#"${DRIVER_ROOT%/}"}
  mkdir -p "$mps/pipe" "$mps/log"
  "$PLUGIN" mps-control-daemon --device "$uuid" --dir "$mps" --driver-root "$DRIVER_ROOT" \
    --pipe-dir "$inroot/pipe" --log-dir "$inroot/log" > "$WORK/mps.out" 2>&1 &
  pid=$!
  for i in $(seq 1 100); do
    [ -e "$mps/pipe/control" ] && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.2
  done
  if [ ! -e "$mps/pipe/control" ]; then
    row FAIL "MPS daemon started" "no control pipe after ${i} tries: $(tail -n 3 "$WORK/mps.out")"
    kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null
    rm -rf "$mps"
    return
  fi
  row PASS "MPS daemon started" "pid $(cat "$mps/daemon.pid"), pipe $mps/pipe, compute mode untouched"
  CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2048M \
    "$PYTHON" -c "$MPS_CLIENT" > "$WORK/mps-client.out" 2>&1
  if grep -q '^alloc 1GiB: ok' "$WORK/mps-client.out"; then
    row PASS "MPS client: 1 GiB under a 2 GiB limit" "allocated"
  else
    row FAIL "MPS client: 1 GiB under a 2 GiB limit" "$(grep -m1 '^alloc 1GiB' "$WORK/mps-client.out" || tail -n 3 "$WORK/mps-client.out")"
  fi
  if grep -q '^alloc 3GiB: failed' "$WORK/mps-client.out"; then
    row PASS "MPS client: 3 GiB over a 2 GiB limit" "$(grep -m1 '^alloc 3GiB' "$WORK/mps-client.out")"
  else
    row FAIL "MPS client: 3 GiB over a 2 GiB limit" "not refused: $(grep -m1 '^alloc 3GiB' "$WORK/mps-client.out" || tail -n 3 "$WORK/mps-client.out")"
  fi
  # SIGTERM: the program sends `quit` and waits for the daemon to exit.
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  if [ "$rc" -eq 0 ]; then
    row PASS "MPS daemon stopped with quit" "exit 0"
  else
    row FAIL "MPS daemon stopped with quit" "exit $rc: $(tail -n 3 "$WORK/mps.out")"
  fi
  rm -rf "$mps"
}
mps_step

# 4. The container: the claim's CDI spec applied to an OCI runtime spec,
# runc running the CUDA probe over Debian's libc (hack/smoke-container.sh
# builds both, cached).
container_step() {
  local deps runc rootfs
  if [ "${GPU_SMOKE_CONTAINER:-run}" = skip ]; then
    row SKIP "container" "GPU_SMOKE_CONTAINER=skip"
    return
  fi
  if [ "$(id -u)" != 0 ]; then
    row SKIP "container" "runc needs root"
    return
  fi
  if ! deps=$(hack/smoke-container.sh 2> "$WORK/deps.err"); then
    row FAIL "container" "hack/smoke-container.sh: $(tail -n 3 "$WORK/deps.err")"
    return
  fi
  runc=$(awk '$1 == "runc" { print $2 }' <<< "$deps")
  rootfs=$(awk '$1 == "rootfs" { print $2 }' <<< "$deps")
  gather "gpudra smoke container" "$GPUDRA" smoke container --driver-root "$DRIVER_ROOT" --hook "$HOOK" \
    --runc "$runc" --rootfs "$rootfs" "${PREPARE_ARGS[@]}"
}
container_step

# 5. Nothing changed.
settings > "$WORK/settings.after"
if cmp -s "$WORK/settings.before" "$WORK/settings.after"; then
  row PASS "GPU settings unchanged (nvidia-smi)" "MIG mode, compute mode, persistence, application clocks, power limit, compute policy"
else
  row FAIL "GPU settings unchanged (nvidia-smi)" "$(diff "$WORK/settings.before" "$WORK/settings.after" | grep '^[<>]' | head -n 4)"
fi
table
