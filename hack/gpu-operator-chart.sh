#!/usr/bin/env bash
# Copyright 2026 The gpu-dra-driver Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Fetches NVIDIA's GPU Operator source (pinned version and go.sum hash) from
# the Go module proxy into a module cache of its own under the cache, and
# prints its directory: deployments/gpu-operator is the operator's Helm chart
# (its node-feature-discovery subchart is inside), assets/ the manifests the
# operator applies at run time. Nothing is vendored and this repository's
# go.mod is not touched. test/gpuoperator renders the chart next to ours
# (docs/install.md, "Beside the NVIDIA GPU Operator").
#
# The operator's release tags (v25.x) are not valid versions of the module
# path github.com/NVIDIA/gpu-operator (no /v25 suffix), so the proxy serves
# it by pseudo-version only; this one is the proxy's @latest.
#
# Usage: hack/gpu-operator-chart.sh     fetch (cached) and print the module dir
# Env:   GPU_DRA_CACHE / XDG_CACHE_HOME pick the cache (hack/cluster/lib.sh);
#        GOPROXY as for go.
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "$0")/cluster/lib.sh"

GPU_OPERATOR_MODULE=github.com/NVIDIA/gpu-operator
GPU_OPERATOR_VERSION=v0.0.0-20250917190837-d73a0086a6ba
GPU_OPERATOR_SUM=h1:LoeqwWjR0h2WRyHXmyYCPVwM/dAdKKxjE8LzyyeuqHI=

export GOMODCACHE=$CACHE/gomod-gpu-operator
export GOFLAGS=-mod=mod
command -v go >/dev/null || die "go not found"
mkdir -p "$GOMODCACHE"
# Outside any module, so go mod download resolves nothing against ours.
cd "$GOMODCACHE"
json=$(GO111MODULE=on go mod download -json "$GPU_OPERATOR_MODULE@$GPU_OPERATOR_VERSION") ||
  die "go mod download $GPU_OPERATOR_MODULE@$GPU_OPERATOR_VERSION failed (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
field() { printf '%s\n' "$json" | sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}$/\1/p"; }
sum=$(field Sum)
dir=$(field Dir)
[ "$sum" = "$GPU_OPERATOR_SUM" ] || die "$GPU_OPERATOR_MODULE@$GPU_OPERATOR_VERSION: hash $sum is not the pinned $GPU_OPERATOR_SUM"
[ -f "$dir/deployments/gpu-operator/Chart.yaml" ] || die "$dir has no deployments/gpu-operator/Chart.yaml"
echo "$dir"
