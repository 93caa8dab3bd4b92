#!/usr/bin/env bash
# This plugin against NVIDIA's reference kubelet plugin under the same
# prepbench (the kubelet's gRPC client, a real etcd and kube-apiserver),
# in interleaved pairs, one whole GPU per claim: the machine's noise lands
# on both sides of each pair, so compare pairs, not runs of other days.
#
# Needs the set-up of ../shared/tools/peer-nvd/README.md under $PEER
# (default /tmp/peer): bin/prepbench, bin/nvd-gpu-kubelet-plugin,
# bin/nvidia-cdi-hook, droot/ (NVIDIA's NVML mock as libnvidia-ml.so.1 and
# its H100 config with 8 devices), k8sbin/{etcd,kube-apiserver}. NVIDIA's
# commits are read from $PEER/nvd and $PEER/kti when they are git
# checkouts, else from $PEER/commits ("nvd=<commit> kti=<commit>", written
# when the trees were exported), else NVD_COMMIT / KTI_COMMIT.
#
# This plugin is built from this checkout (commit printed, "-dirty" when
# tracked files differ from it), from REV=<commit> (a temporary worktree,
# so the checkout is not touched), or OURS=<binary> is run as it is.
# Env: PAIRS (5), CYCLES (300), CONC (1), QPS (1000; burst the same, both
# plugins), WARMUP (10).
# Prints per pair: p50 and p99 of prepare (ms) of each, ours/NVIDIA's p50
# ratio, each one's prepare+unprepare cycles per second and the 1-minute
# load average before and after the pair, then the median ratios (p50 and
# cycles/s), in how many pairs ours was faster, and the commits. The
# order within a pair alternates (NVIDIA first in odd pairs). For this
# plugin it also prints how many device-status writes were made and
# skipped (claims unprepared before their write; devicestatus.Gate).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PEER=${PEER:-/tmp/peer}
PAIRS=${PAIRS:-5} CYCLES=${CYCLES:-300} CONC=${CONC:-1} QPS=${QPS:-1000} WARMUP=${WARMUP:-10}
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
export CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}

die() { echo "bench-peer: $*" >&2; exit 1; }
for f in bin/prepbench bin/nvd-gpu-kubelet-plugin bin/nvidia-cdi-hook droot/config/config.yaml droot/usr/lib64/libnvidia-ml.so.1 k8sbin/etcd k8sbin/kube-apiserver; do
  [ -e "$PEER/$f" ] || die "$PEER/$f is missing: set up ../shared/tools/peer-nvd/README.md under PEER=$PEER"
done

commit_of() { # dir key
  if git -C "$1" rev-parse HEAD >/dev/null 2>&1 && [ "$(git -C "$1" rev-parse --show-toplevel)" = "$(cd "$1" && pwd)" ]; then
    git -C "$1" rev-parse --short=8 HEAD
  elif [ -f "$PEER/commits" ] && grep -qo "$2=[0-9a-f]*" "$PEER/commits"; then
    grep -o "$2=[0-9a-f]*" "$PEER/commits" | cut -d= -f2
  else
    echo unknown
  fi
}
NVD_COMMIT=${NVD_COMMIT:-$(commit_of "$PEER/nvd" nvd)}
KTI_COMMIT=${KTI_COMMIT:-$(commit_of "$PEER/kti" kti)}

work=$(mktemp -d "$PEER/bench-peer.XXXX")
trap 'rm -rf "$work"' EXIT
build() { # source dir, binary
  echo "building this plugin ($ours_commit) into $2"
  (cd "$1" && go build -trimpath -tags grpcnotrace -ldflags "-s -w" -o "$2" ./cmd/gpu-kubelet-plugin)
}
if [ -n "${OURS:-}" ]; then
  ours_bin=$OURS ours_commit="binary $OURS"
elif [ -n "${REV:-}" ]; then
  ours_commit=$(git -C "$REPO" rev-parse --short=8 "$REV^{commit}")
  ours_bin=$PEER/bin/ours-$ours_commit
  git -C "$REPO" worktree add -q --detach "$work/src" "$ours_commit"
  build "$work/src" "$ours_bin" || { git -C "$REPO" worktree remove --force "$work/src"; die "build of $ours_commit failed"; }
  git -C "$REPO" worktree remove --force "$work/src"
else
  ours_commit=$(git -C "$REPO" rev-parse --short=8 HEAD)
  git -C "$REPO" diff --quiet HEAD -- || ours_commit+=-dirty
  ours_bin=$PEER/bin/ours-$ours_commit
  build "$REPO" "$ours_bin"
fi

devs=(); for i in 0 1 2 3 4 5 6 7; do devs+=(--device "gpu-$i"); done
load1() { cut -d' ' -f1 /proc/loadavg; }

# run LABEL PAIR writes "p50 p99 cycles/s" (prepare ms) into $work/LABEL-PAIR.res;
# prepbench's JSON and output and the plugin's log stay in $work.
run() {
  local label=$1 tag=$1-$2 plugin
  if [ "$label" = nvd ]; then
    plugin=(env MOCK_NVML_CONFIG="$PEER/droot/config/config.yaml" "$PEER/bin/nvd-gpu-kubelet-plugin"
      --kubeconfig={kubeconfig} --node-name={node} --cdi-root={cdi_dir}
      --kubelet-registrar-directory-path={registrar_dir} --kubelet-plugins-directory-path={plugins_dir}
      --nvidia-driver-root="$PEER/droot" --container-driver-root="$PEER/droot"
      --nvidia-cdi-hook-path="$PEER/bin/nvidia-cdi-hook" --image-name=none)
  else
    plugin=("$ours_bin" --kubeconfig={kubeconfig} --node-name={node} --kubelet-dir={kubelet_dir}
      --state-dir={state_dir} --cdi-root={cdi_dir} --simulate h100x8 --http-endpoint=)
  fi
  plugin+=(--kube-api-qps="$QPS" --kube-api-burst="$QPS")
  # --keep: the plugin's log says what became of the device statuses.
  if ! timeout 900 "$PEER/bin/prepbench" --driver gpu.nvidia.com --bin-dir "$PEER/k8sbin" --n "$CYCLES" \
      --warmup "$WARMUP" --concurrency "$CONC" "${devs[@]}" --keep --workdir "$work/$tag" \
      --json-file "$work/$tag.json" -- "${plugin[@]}" >"$work/$tag.log" 2>&1; then
    tail -20 "$work/$tag.log" >&2
    die "$tag failed (log above)"
  fi
  python3 -c 'import json,sys; x=json.load(open(sys.argv[1])); print("%.2f %.2f %.1f" % (x["prepare_ms"]["p50"], x["prepare_ms"]["p99"], x["throughput_cycles_per_s"]))' "$work/$tag.json" >"$work/$tag.res"
}

echo "machine: nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo "each run: prepbench --n $CYCLES --warmup $WARMUP --concurrency $CONC, 8 devices, --kube-api-qps=$QPS --kube-api-burst=$QPS both"
printf '%-5s %-18s %-18s %-7s %-16s %-18s %s\n' pair "NVIDIA p50/p99" "ours p50/p99" ratio "cycles/s NV/ours" "load before/after" "ours statuses written/skipped"
ratios=() tputs=()
for p in $(seq 1 "$PAIRS"); do
  before=$(load1)
  if [ $((p % 2)) = 1 ]; then run nvd "$p"; run ours "$p"; else run ours "$p"; run nvd "$p"; fi
  read -r n50 n99 ncps <"$work/nvd-$p.res"
  read -r o50 o99 ocps <"$work/ours-$p.res"
  after=$(load1)
  ratio=$(python3 -c "print('%.2f' % ($o50 / $n50))")
  ratios+=("$ratio")
  tputs+=("$(python3 -c "print('%.2f' % ($ocps / $ncps))")")
  st=$(grep -o 'written=[0-9]* skipped=[0-9]*' "$work/ours-$p/plugin.log" | tail -1 | sed 's/written=//; s/ skipped=/\//')
  printf '%-5s %-18s %-18s %-7s %-16s %-18s %s\n' "$p" "$n50 / $n99" "$o50 / $o99" "$ratio" "$ncps / $ocps" "$before / $after" "${st:-?}"
  rm -rf "$work/nvd-$p" "$work/ours-$p"
done
python3 - "${ratios[*]}" "${tputs[*]}" <<'EOF'
import statistics, sys
r = [float(x) for x in sys.argv[1].split()]
t = [float(x) for x in sys.argv[2].split()]
print("median ratio (ours/NVIDIA prepare p50): %.2f over %d pairs; ours faster in %d of %d" % (statistics.median(r), len(r), sum(x < 1 for x in r), len(r)))
print("median ratio (ours/NVIDIA cycles/s): %.2f over %d pairs; ours higher in %d of %d" % (statistics.median(t), len(t), sum(x > 1 for x in t), len(t)))
EOF
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commits: this plugin $ours_commit; NVIDIA's plugin (kubernetes-sigs/dra-driver-nvidia-gpu) $NVD_COMMIT; NVML mock (NVIDIA/k8s-test-infra) $KTI_COMMIT"
