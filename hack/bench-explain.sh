#!/usr/bin/env bash
# Copyright 2026 The gpu-dra-driver Authors.
# SPDX-License-Identifier: Apache-2.0
#
# The pending explainer at scale (issue 23): on the throw-away control plane
# and kubelet-less fleet of hack/bench-scale.sh (its own etcd, kube-apiserver
# and kube-scheduler from the cluster cache; the local cluster is not
# touched), runs gpu-dra-webhook as a process and, per fleet size, for a pod
# that only a NoSchedule taint on one node's GPU 1 keeps Pending ("tainted")
# and one that fits nowhere ("untainted"), measures: the time from the
# scheduler's Unschedulable to the explainer's Event, the webhook's CPU
# seconds and its RSS (idle after its caches synced, after the case, VmHWM),
# and `gpudra diagnose pod` on the same pod (wall and max RSS, median of 3).
# Also times `gpudra usage`, `gpudra capacity --mig-profile` and `gpudra
# capacity --for deployment/bench-capacity` (a pod of one CPU and one 1g.10gb
# device through the scheduler's filters) on each fleet (docs/fleet.md).
# Run time on 2 cores: 2.7 min for the default 100,500 (builds ~20 s, each
# size ~50 s of fixed waits, creating 500 nodes' slices ~30 s).
# Usage: hack/bench-explain.sh [benchscale flags...]
# Env: NODES (100,500), LAYOUTS (mig-1g: dynamic MIG, 216 devices per node),
#      OUT (/tmp/perf-explain-table.md; JSON next to it),
#      GATES (default: Kubernetes 1.37's; cluster: the local cluster's; or a list).
set -euo pipefail
source "$(dirname "$0")/cluster/lib.sh"
REPO=$(cd "$(dirname "$0")/.." && pwd)
gates=$(bench_gates)
export CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}
need_built etcd kube-apiserver kube-scheduler helm
OUT=${OUT:-/tmp/perf-explain-table.md}
work=$(mktemp -d /tmp/gdra-bench-explain.XXXX)
trap 'rm -rf "$work"' EXIT
t0=$(now)
cd "$REPO"
go build -tags grpcnotrace -o "$work/gpu-kubelet-plugin" ./cmd/gpu-kubelet-plugin
go build -tags grpcnotrace -o "$work/gpu-dra-webhook" ./cmd/gpu-dra-webhook
go build -tags grpcnotrace -o "$work/gpudra" ./cmd/gpudra
go build -o "$work/benchscale" ./test/scale
helm template bench deployments/helm/gpu-dra-driver --kube-version "v$K8S_VERSION" >"$work/chart.yaml"
# Which explainer was measured: uncommitted changes count.
say "benchmark in $work; pkg/pendingexplainer at $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- pkg/pendingexplainer || echo ' + uncommitted changes:')"
git diff --stat HEAD -- pkg/pendingexplainer
say "feature gates: ${gates:-1.37 defaults}; $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
"$work/benchscale" -explain-webhook "$work/gpu-dra-webhook" -explain-gpudra "$work/gpudra" \
  -k8s-bin "$BIN_K8S" -etcd-bin "$BIN_ETCD" -plugin "$work/gpu-kubelet-plugin" \
  -deviceclasses "$work/chart.yaml" -feature-gates "$gates" -work-dir "$work/runs" \
  -nodes "${NODES:-100,500}" -layouts "${LAYOUTS:-mig-1g}" -out "$OUT" -json "${OUT%.md}.json" "$@"
say "bench-explain done in $(since "$t0") s; table in $OUT"
