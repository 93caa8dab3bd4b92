#!/usr/bin/env bash
# Copyright 2026 The gpu-dra-driver Authors.
# SPDX-License-Identifier: Apache-2.0
#
# The smallest allocator change that removes what limits dynamic MIG on a
# busy node (docs/performance.md, "Busy fleets"): the v1.37 structured
# allocator checks a device's shared counters only after its CEL selectors,
# so every device whose counters are used up still costs a CEL evaluation.
# hack/allocator/counters-before-selectors.patch checks them first. This
# script applies it to a copy of k8s.io/dynamic-resource-allocation from
# the module cache (nothing of it is kept), then runs, with and without the
# patch and interleaved, BenchmarkFilterPerNode and the allocation tests
# (the allocations must not change), through go test -modfile.
# Env: ROUNDS (3), BENCH (BenchmarkFilterPerNode's regexp), BENCHTIME (500x).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}
mod=k8s.io/dynamic-resource-allocation
ver=$(go list -m -f '{{.Version}}' $mod)
src=$(go list -m -f '{{.Dir}}' $mod)
work=$(mktemp -d /tmp/gdra-allocator-patch.XXXX)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src" "$work/dra"
chmod -R u+w "$work/dra"
patch -s -p1 -d "$work/dra" <hack/allocator/counters-before-selectors.patch
cp go.mod "$work/go.mod"; cp go.sum "$work/go.sum"
go mod edit -modfile="$work/go.mod" -replace "$mod=$work/dra"
echo "== $mod $ver, patched with counters-before-selectors.patch: allocation tests"
go test -modfile="$work/go.mod" -count=1 ./pkg/resourceslices/ ./internal/migpacking/ ./test/chart/ -run 'Alloc|Mig|Packing|Placement|Fraction|Sharing|Monitor|Taint|Profile'
go test -c -o "$work/patched.test" -modfile="$work/go.mod" ./pkg/resourceslices/
go test -c -o "$work/stock.test" ./pkg/resourceslices/
for r in $(seq "${ROUNDS:-3}"); do
  for v in stock patched; do
    (cd pkg/resourceslices && "$work/$v.test" -test.run '^$' -test.bench "${BENCH:-FilterPerNode/^(whole|mig-1g|mig-1g-class|mig-whole)$}" \
      -test.benchtime "${BENCHTIME:-500x}" -test.benchmem) | awk -v v="$v" '/^Benchmark/ {print v, $0}'
  done
done
