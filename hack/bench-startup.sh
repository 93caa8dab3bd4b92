#!/usr/bin/env bash
# Start-up benchmark against the local cluster's real apiserver: runs the
# release-built plugin (simulated GPUs) on temp dirs RUNS times and reports,
# per run and as medians,
#   - publish: seconds from exec to the last of the pool's ResourceSlices
#     arriving at a watch, and how many the controller rewrote afterwards;
#   - RSS: VmRSS / RssAnon / RssFile after IDLE seconds (one /metrics scrape
#     in between), page cache dropped before each start.
# Usage: hack/bench-startup.sh [PROFILE] [plugin flags...]
# Env: RUNS (5), IDLE (60). Needs root (drop_caches) and `make cluster-up`.
set -euo pipefail
source "$(dirname "$0")/cluster/lib.sh"
export KUBECONFIG=$KUBECONFIG_PATH
REPO=$(cd "$(dirname "$0")/.." && pwd)
PROFILE=${1:-h100x8}; shift || true
RUNS=${RUNS:-5} IDLE=${IDLE:-60}
kubectl get --raw /readyz >/dev/null || { echo "cluster not running: make cluster-up" >&2; exit 1; }
if kubectl get pods -A -l app.kubernetes.io/name=gpu-dra-driver -o name | grep -q .; then
  echo "the chart's plugin runs on $NODE; uninstall it first (helm uninstall -n gpu-dra-driver gpu-dra-driver)" >&2; exit 1
fi

work=$(mktemp -d /tmp/gdra-bench.XXXX); trap 'rm -rf "$work"' EXIT
bin=$work/gpu-kubelet-plugin
(cd "$REPO" && CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go build -trimpath -tags grpcnotrace -ldflags "-s -w" -o "$bin" ./cmd/gpu-kubelet-plugin)
cp "$REPO/bin/nvidia-smi-sim" "$work/" 2>/dev/null || (cd "$REPO" && CGO_ENABLED=0 go build -o "$work/nvidia-smi-sim" ./cmd/nvidia-smi-sim)
echo "binary: $(stat -c %s "$bin") bytes; profile $PROFILE $*; $RUNS runs, RSS after ${IDLE}s idle"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
: >"$work/results"
for i in $(seq 1 "$RUNS"); do
  d=$work/run$i; mkdir -p "$d"
  kubectl delete resourceslices --field-selector "spec.driver=gpu.nvidia.com,spec.nodeName=$NODE" >/dev/null
  kubectl get resourceslices -w --output-watch-events \
    -o jsonpath='{.type} {.object.spec.nodeName}{"\n"}' 2>/dev/null |
    while read -r type node; do [ "$node" = "$NODE" ] && echo "$(date +%s.%N) $type"; done >"$d/watch" &
  watcher=$!
  sleep 1.5
  sync; echo 1 >/proc/sys/vm/drop_caches
  t0=$(date +%s.%N)
  "$bin" --kubeconfig "$KUBECONFIG" --node-name "$NODE" --simulate "$PROFILE" --kubelet-dir "$d/kubelet" \
    --state-dir "$d/state" --cdi-root "$d/cdi" --http-endpoint 127.0.0.1:19411 "$@" >"$d/log" 2>&1 &
  pid=$!
  sleep $((IDLE - 2)); curl -s 127.0.0.1:19411/metrics >/dev/null; sleep 2
  read -r rss anon file < <(awk '/^VmRSS/{r=$2} /^RssAnon/{a=$2} /^RssFile/{f=$2} END {print r, a, f}' "/proc/$pid/status")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  kill "$watcher" 2>/dev/null || true; pkill -f "kubectl get resourceslices -w" || true
  last=$(awk '$2=="ADDED"{t=$1} END {print t}' "$d/watch")
  rewrites=$(grep -c -E 'MODIFIED|DELETED' "$d/watch" || true)
  publish=$(awk -v a="$last" -v b="$t0" 'BEGIN {print (a == "") ? "nan" : a - b}')
  awk -v i="$i" -v p="$publish" -v w="$rewrites" -v r="$rss" -v a="$anon" -v f="$file" 'BEGIN {
    printf "run %d: slices published %.3f s after exec, %d rewritten; RSS %.1f MiB (anon %.1f, file %.1f)\n", i, p, w, r/1024, a/1024, f/1024 }'
  echo "$publish $rss $anon $file" >>"$work/results"
done
awk -v p="$(cut -d' ' -f1 "$work/results" | median)" -v r="$(cut -d' ' -f2 "$work/results" | median)" \
  -v a="$(cut -d' ' -f3 "$work/results" | median)" -v f="$(cut -d' ' -f4 "$work/results" | median)" 'BEGIN {
  printf "median: published %.3f s after exec; RSS %.1f MiB (anon %.1f, file %.1f)\n", p, r/1024, a/1024, f/1024 }'
