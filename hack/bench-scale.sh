#!/usr/bin/env bash
# Copyright 2026 The gpu-dra-driver Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Scheduling at scale: a real kube-scheduler binds DRA pods over N
# kubelet-less Nodes whose ResourceSlices are what the plugin publishes
# (test/scale). Starts its own etcd, kube-apiserver, kube-scheduler (and
# a resourceclaim-only kube-controller-manager) on free loopback ports from
# the cluster cache; the local cluster (make cluster-up) is not touched.
# Usage: hack/bench-scale.sh [benchscale flags...]
# Env: NODES (100,500), LAYOUTS (whole,mig-1g,mig-1g-class,mig3p-1g,mig-whole,frac-20gi),
#      FILLS (0,50,90: percent of each node held before the timed pods),
#      MAX_PODS (at most this many timed pods per run; empty: no limit),
#      PCT_SCORE (the scheduler's percentageOfNodesToScore; empty: its default),
#      SCHEDULER (a kube-scheduler binary to run instead of the cache's, e.g.
#      one with hack/allocator's patches: hack/build-patched-scheduler.sh),
#      PLUGIN (a gpu-kubelet-plugin binary to take the slices from, e.g. an
#      older build to compare with; default: built from this tree),
#      MODES (claims,templates), REPEATS (2), CPUPROFILE (layout/nodes/mode: CPU profiles of the scheduler and the API server, next to OUT),
#      PODS_PER_NODE (whole=4,mig-1g=1,mig3p-1g=1,mig-whole=1,frac-20gi=4), OUT (/tmp/perf-scale-table.md),
#      GATES: default (Kubernetes' own defaults of $K8S_VERSION, what a production cluster
#      runs: every gate this driver needs is on), cluster (the local cluster's,
#      every alpha DRA gate on too: the scheduler then uses the experimental
#      allocator and the node-allocatable checks) or an explicit list.
set -euo pipefail
source "$(dirname "$0")/cluster/lib.sh"
REPO=$(cd "$(dirname "$0")/.." && pwd)
gates=$(bench_gates)
export CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}
need_built etcd kube-apiserver kube-scheduler kube-controller-manager helm
OUT=${OUT:-/tmp/perf-scale-table.md}
work=$(mktemp -d /tmp/gdra-bench-scale.XXXX)
trap 'rm -rf "$work"' EXIT
t0=$(now)
cd "$REPO"
if [ -n "${PLUGIN:-}" ]; then cp "$PLUGIN" "$work/gpu-kubelet-plugin"
else go build -tags grpcnotrace -o "$work/gpu-kubelet-plugin" ./cmd/gpu-kubelet-plugin; fi
go build -o "$work/benchscale" ./test/scale
# The chart's DeviceClasses, as the chart renders them.
helm template bench deployments/helm/gpu-dra-driver --kube-version "v$K8S_VERSION" >"$work/chart.yaml"
say "benchmark in $work; kube-scheduler ${SCHEDULER:-$BIN_K8S/kube-scheduler}; feature gates: ${gates:-1.37 defaults}; $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
"$work/benchscale" -k8s-bin "$BIN_K8S" -etcd-bin "$BIN_ETCD" -plugin "$work/gpu-kubelet-plugin" ${SCHEDULER:+-scheduler "$SCHEDULER"} \
  -deviceclasses "$work/chart.yaml" -feature-gates "$gates" -work-dir "$work/runs" \
  -nodes "${NODES:-100,500}" -layouts "${LAYOUTS:-whole,mig-1g,mig-1g-class,frac-20gi,mig-whole}" \
  -fills "${FILLS:-0,50,90}" -percentage-of-nodes-to-score "${PCT_SCORE:-0}" -max-timed-pods "${MAX_PODS:-0}" \
  -modes "${MODES:-claims,templates}" -repeats "${REPEATS:-2}" \
  -pods-per-node "${PODS_PER_NODE:-whole=1,mig-1g=1,mig-1g-class=1,mig3p-1g=1,mig-whole=1,frac-20gi=1}" ${CPUPROFILE:+-cpuprofile "$CPUPROFILE"} -out "$OUT" -json "${OUT%.md}.json" "$@"
say "bench-scale done in $(since "$t0") s; table in $OUT"
