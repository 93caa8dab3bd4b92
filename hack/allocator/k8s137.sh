#!/usr/bin/env bash
# Copyright 2026 The gpu-dra-driver Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Writes a module file that is go.mod with the k8s.io/* modules go.mod links
# at Kubernetes 1.37's version (the one internal/allocator/k8s137.go is
# written for), and prints its path, for
#
#   go test -modfile="$(hack/allocator/k8s137.sh)" -tags k8s137 ./internal/migpacking/
#
# so that the allocator-level tests run on 1.37's allocator too, with the
# same harness (make test-k8s137, make bench-packing K8S_ALLOCATOR=1.37).
# Derived from go.mod each time (a few seconds with a warm module cache),
# it cannot drift from it: the direct requirements stay go.mod's, the
# indirect ones are dropped and go mod tidy works out 1.37's (for example
# structured-merge-diff/v6 v6.4.2 instead of v7). Only
# the module proxy is needed. Output: _output/allocator-k8s137/go.{mod,sum}.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
GO=${GO:-go}
version=$(sed -n 's/^const linkedVersion = "\(v[^"]*\)"$/\1/p' internal/allocator/k8s137.go)
[[ $version == v0.37.* ]] || { echo "k8s137.sh: no v0.37 linkedVersion in internal/allocator/k8s137.go" >&2; exit 1; }
dir=_output/allocator-k8s137
mkdir -p "$dir"
cp go.mod "$dir/go.mod.new"
cp go.sum "$dir/go.sum.new"
mod=$dir/go.mod.new
# The staging modules are those at go.mod's k8s.io/dynamic-resource-allocation
# version; klog and utils keep theirs.
linked=$(sed -n 's/^\s*k8s.io\/dynamic-resource-allocation \(v\S*\)$/\1/p' go.mod)
args=()
# go.mod's require blocks, as go mod tidy writes them: "path version [// indirect]".
while read -r path ver indirect; do
  if [[ $indirect == indirect ]]; then
    args+=("-droprequire=$path")
  elif [[ $path == k8s.io/* && $ver == "$linked" ]]; then
    args+=("-require=$path@$version")
  fi
done < <(awk '/^require \($/ {in_req = 1; next} in_req && /^\)$/ {in_req = 0} in_req {print $1, $2, ($4 == "indirect" ? "indirect" : "direct")}' "$mod")
$GO mod edit "${args[@]}" "$mod"
# -modfile=x.mod reads and writes x.sum: move both into place together.
mv "$dir/go.sum.new" "$dir/k8s137.sum"
mv "$mod" "$dir/k8s137.mod"
# -e: as for go.mod, modules that only dependencies' tests import may be refused.
$GO mod tidy -e -modfile="$dir/k8s137.mod" >&2
grep -q "k8s.io/dynamic-resource-allocation $version\$" "$dir/k8s137.mod" || {
  echo "k8s137.sh: $dir/k8s137.mod does not require k8s.io/dynamic-resource-allocation $version" >&2; exit 1; }
echo "$PWD/$dir/k8s137.mod"
