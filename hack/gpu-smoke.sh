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
#   3. the GPUs' settings compared before and after.
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

# 3. Nothing changed.
settings > "$WORK/settings.after"
if cmp -s "$WORK/settings.before" "$WORK/settings.after"; then
  row PASS "GPU settings unchanged (nvidia-smi)" "MIG mode, compute mode, persistence, application clocks, power limit, compute policy"
else
  row FAIL "GPU settings unchanged (nvidia-smi)" "$(diff "$WORK/settings.before" "$WORK/settings.after" | grep '^[<>]' | head -n 4)"
fi
table
