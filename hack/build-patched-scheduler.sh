#!/usr/bin/env bash
# Copyright 2026 The gpu-dra-driver Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Builds kube-scheduler v$K8S_VERSION with hack/allocator's patches applied to
# its structured allocator (k8s.io/dynamic-resource-allocation), so that
# make bench-scale can run the patches end to end:
#   SCHEDULER=$(hack/build-patched-scheduler.sh) NODES=500 FILLS=50 make bench-scale
# It reuses the module of the cluster cache's Kubernetes build
# (hack/cluster/build.sh all), replaces the allocator module with a patched
# copy of the module cache's, and builds with the same version stamps. The
# binary is cached under $CACHE/bin, keyed by the Kubernetes version and the
# patches' checksum; the script prints its path (everything else goes to
# stderr).
# Env: PATCHES (space-separated names in hack/allocator/, applied in order;
#      default: every patch of hack/allocator/series).
set -euo pipefail
source "$(dirname "$0")/cluster/lib.sh"
REPO=$(cd "$(dirname "$0")/.." && pwd)
patches=${PATCHES:-$(allocator_series | tr '\n' ' ')}
paths=()
for p in $patches; do
  [ -f "$REPO/hack/allocator/$p" ] || die "PATCHES: no hack/allocator/$p"
  paths+=("$REPO/hack/allocator/$p")
done
key=$(cat "${paths[@]}" | sha256sum | cut -c1-12)
out=$CACHE/bin/kube-scheduler-v$K8S_VERSION-allocator-$key
if [ -x "$out/kube-scheduler" ]; then echo "$out/kube-scheduler"; exit 0; fi

wrap=$CACHE/build/kubernetes-v$K8S_VERSION
[ -f "$wrap/go.sum" ] || die "no Kubernetes build module in $wrap; run hack/cluster/build.sh all"
mod=k8s.io/dynamic-resource-allocation
ver=v0.${K8S_VERSION#1.}
d=$CACHE/build/kube-scheduler-v$K8S_VERSION-allocator-$key
s=$(now)
rm -rf "$d"; mkdir -p "$d/module"
cp "$wrap/go.mod" "$wrap/go.sum" "$wrap/tools.go" "$d/module/"
src=$(cd "$d/module" && go mod download -json "$mod@$ver" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || die "download $mod@$ver"
cp -r "$src" "$d/allocator"; chmod -R u+w "$d/allocator"
for p in "${paths[@]}"; do
  patch -s -p1 -d "$d/allocator" <"$p" || die "$(basename "$p") does not apply to $mod $ver"
  say "applied $(basename "$p") to $mod $ver" >&2
done
(cd "$d/module" && go mod edit -replace "$mod=$d/allocator")
ldf=$(k8s_ldflags)
mkdir -p "$out"
(cd "$d/module" && go build -trimpath -ldflags "$ldf" -o "$out/kube-scheduler.tmp" k8s.io/kubernetes/cmd/kube-scheduler) >&2 || die "build kube-scheduler failed"
mv "$out/kube-scheduler.tmp" "$out/kube-scheduler"
say "built kube-scheduler v$K8S_VERSION with $patches in $(since "$s") s" >&2
echo "$out/kube-scheduler"
