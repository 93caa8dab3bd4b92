#!/usr/bin/env bash
# Copyright 2026 The gpu-dra-driver Authors.
# SPDX-License-Identifier: Apache-2.0
#
# The smallest allocator changes that remove what limits dynamic MIG on a
# busy fleet (docs/performance.md, "Busy fleets"), as patches against the
# v1.37 structured allocator (hack/allocator/):
#   counters-before-selectors.patch: shared counters are checked before the
#     CEL selectors, so a device whose counters are used up (a whole GPU
#     with MIG devices on it) costs no CEL evaluation;
#   convert-slices-once.patch: each ResourceSlice object is converted to the
#     allocator's types once for as long as the object lives, not on every
#     Filter call (an informer never modifies an object it handed out).
# This script applies them to copies of k8s.io/dynamic-resource-allocation
# from the module cache (nothing of it is kept): "counters" has the first,
# "both" both. It runs the allocation tests on each (the allocations must
# not change), then BenchmarkFilterPerNode on stock, counters and both,
# interleaved, through go test -modfile.
# Env: ROUNDS (3), BENCH (BenchmarkFilterPerNode's regexp), BENCHTIME (500x).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}
mod=k8s.io/dynamic-resource-allocation
ver=$(go list -m -f '{{.Version}}' $mod)
src=$(go list -m -f '{{.Dir}}' $mod)
work=$(mktemp -d /tmp/gdra-allocator-patch.XXXX)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
for v in counters both; do
  cp -r "$src" "$work/$v"
  chmod -R u+w "$work/$v"
  patch -s -p1 -d "$work/$v" <hack/allocator/counters-before-selectors.patch
  [ "$v" = counters ] || patch -s -p1 -d "$work/$v" <hack/allocator/convert-slices-once.patch
  cp go.mod "$work/$v.mod"; cp go.sum "$work/$v.sum"
  go mod edit -modfile="$work/$v.mod" -replace "$mod=$work/$v"
  echo "== $mod $ver, $v: allocation tests"
  go test -modfile="$work/$v.mod" -count=1 ./pkg/resourceslices/ ./internal/migpacking/ ./test/chart/ -run 'Alloc|Mig|Packing|Placement|Fraction|Sharing|Monitor|Taint|Profile|Order'
  go test -c -o "$work/$v.test" -modfile="$work/$v.mod" ./pkg/resourceslices/
done
go test -c -o "$work/stock.test" ./pkg/resourceslices/
for r in $(seq "${ROUNDS:-3}"); do
  for v in stock counters both; do
    (cd pkg/resourceslices && "$work/$v.test" -test.run '^$' -test.bench "${BENCH:-FilterPerNode/^(whole|mig-1g|mig-1g-class|mig-whole)$}" \
      -test.benchtime "${BENCHTIME:-500x}" -test.benchmem) | awk -v v="$v" '/^Benchmark/ {print v, $0}'
  done
done
