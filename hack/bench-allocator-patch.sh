#!/usr/bin/env bash
# Copyright 2026 The gpu-dra-driver Authors.
# SPDX-License-Identifier: Apache-2.0
#
# The smallest allocator changes that remove what limits dynamic MIG on a
# busy fleet (docs/performance.md, "Busy fleets"), as patches against the
# v1.37 structured allocator, applied in the order of hack/allocator/series:
#   counters-before-selectors.patch: shared counters are checked before the
#     CEL selectors, so a device whose counters are used up (a whole GPU
#     with MIG devices on it) costs no CEL evaluation;
#   convert-slices-once.patch: each ResourceSlice object is converted to the
#     allocator's types once for as long as the object lives, not on every
#     Filter call (an informer never modifies an object it handed out);
#   counters-compared-where-consumed.patch: a device's counter check compares
#     the counters it consumes, not every counter of its pool;
#   pools-built-once.patch: a node's pool (device names and counter
#     consumption validated) is built once while its converted slices stay
#     the same, not on every Filter call;
#   selector-results-kept.patch: what a CEL selector said about a device is
#     kept with the device's converted slice (at most 1,024 results a slice)
#     for the next pod, instead of evaluating it again;
#   counters-kept-per-pool.patch: the allocated devices are counted per pool
#     once per pod, and each pool keeps the counters its allocated devices
#     leave until they change, instead of recomputing them on every Filter
#     call from a fleet-wide lookup of each of its devices;
#   pool-facts-kept.patch: whether a slice uses compatibility groups and
#     whether a pool has binding conditions are answered once per object;
#   counters-compared-before-reserving.patch: a device's counters are
#     compared with what is left before they are reserved, so a device the
#     counters refuse costs no map writes.
# This script applies each prefix of the series to a copy of
# k8s.io/dynamic-resource-allocation from the module cache (nothing of it is
# kept), runs the module's own allocator tests and this project's allocation
# tests on it (the allocations must not change; the scheduler's parallel
# Filter calls on one allocator under the race detector), then BenchmarkFilterPerNode
# on stock and every prefix, interleaved, through go test -modfile.
# Env: ROUNDS (3), BENCH (BenchmarkFilterPerNode's regexp), BENCHTIME (500x),
#      UPTO (measure only the first UPTO patches of the series),
#      TESTS_ONLY=1 (make allocator-patches, run by CI: the whole series'
#      tests only, no benchmark, so that a patch that stops applying or
#      changes an allocation fails).
set -euo pipefail
source "$(dirname "$0")/cluster/lib.sh"
cd "$(dirname "$0")/.."
export CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}
mod=k8s.io/dynamic-resource-allocation
# The series is written against v0.37.2 (Kubernetes 1.37). On 1.38's
# allocator (go.mod's v0.38.0-beta.0) only counters-before-selectors.patch
# applies; the rest meet code 1.38 rewrote (it takes slices converted once,
# draapi.ResourceSlice, as convert-slices-once.patch did) and are not ported
# yet (docs/performance.md). This project's own tests need go.mod's
# allocator API, so on another version only the module's tests run.
ver=${ALLOCATOR_VERSION:-v0.37.2}
own=$(go list -m -f '{{.Version}}' $mod)
src=$(go mod download -json "$mod@$ver" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || die "go mod download $mod@$ver failed"
mapfile -t series < <(allocator_series)
n=${UPTO:-${#series[@]}}
work=$(mktemp -d /tmp/gdra-allocator-patch.XXXX)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
variants=(stock)
first=1
[ -z "${TESTS_ONLY:-}" ] || first=$n
for k in $(seq "$first" "$n"); do
  v=p$k
  variants+=("$v")
  cp -r "$src" "$work/$v"
  chmod -R u+w "$work/$v"
  for p in "${series[@]:0:$k}"; do patch -s -p1 -d "$work/$v" <"hack/allocator/$p"; done
  cp go.mod "$work/$v.mod"; cp go.sum "$work/$v.sum"
  go mod edit -modfile="$work/$v.mod" -replace "$mod=$work/$v"
  echo "== $mod $ver + ${series[*]:0:$k} ($v): the module's allocator tests, then this project's allocation tests"
  (cd "$work/$v" && go test -count=1 ./structured/...)
  if [ "$ver" != "$own" ]; then
    say "$mod $ver is not go.mod's $own: this project's allocation tests and the benchmark need go.mod's allocator API, skipped"
    continue
  fi
  go test -modfile="$work/$v.mod" -count=1 ./pkg/resourceslices/ ./internal/migpacking/ ./test/chart/ -run 'Alloc|Mig|Packing|Placement|Fraction|Sharing|Monitor|Taint|Profile|Order'
  # The scheduler's parallel Filter calls on one allocator, under the race
  # detector: the patches keep state across calls and pods.
  go test -race -modfile="$work/$v.mod" -count=1 ./pkg/resourceslices/ -run 'ParallelFilter'
  [ -n "${TESTS_ONLY:-}" ] || go test -c -o "$work/$v.test" -modfile="$work/$v.mod" ./pkg/resourceslices/
done
[ "$ver" = "$own" ] || exit 0
[ -z "${TESTS_ONLY:-}" ] || exit 0
go test -c -o "$work/stock.test" ./pkg/resourceslices/
for r in $(seq "${ROUNDS:-3}"); do
  for v in "${variants[@]}"; do
    (cd pkg/resourceslices && "$work/$v.test" -test.run '^$' -test.bench "${BENCH:-FilterPerNode/^(whole|mig-1g|mig-1g-class|mig-whole)$}" \
      -test.benchtime "${BENCHTIME:-500x}" -test.benchmem) | awk -v v="$v" '/^Benchmark/ {print v, $0}'
  done
done
