#!/usr/bin/env bash
# End-to-end tests on a real local cluster: builds what is missing (cached),
# brings the cluster up (or reuses it), installs the chart with simulated
# H100s and runs test/e2e. KEEP_CLUSTER=1 leaves the cluster running;
# E2E_RUN=<regexp> runs only the matching tests (go test -run), E2E_SKIP
# skips the matching ones (go test -skip);
# E2E_TIMEOUT (default 55m) bounds the go test run. Kueue is built here
# (cached) and started by its test only (hack/cluster/kueue.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/cluster/lib.sh
lock_cluster
export KUBECONFIG=$KUBECONFIG_PATH CONTAINERD_ADDRESS=$CTRD_SOCK GPU_DRA_KUBELET_DIR=$KUBELET_DIR
# The node lifecycle tests stop and start cluster components ($CLUSTER/pids)
# and cache the old driver image of the upgrade test under $CACHE.
export GPU_DRA_CACHE=$CACHE GPU_DRA_CLUSTER_DIR=$CLUSTER
s=$(now); hack/cluster/build.sh all; hack/cluster/build.sh kueue; say "build: $(since "$s")s"
s=$(now); hack/cluster/cluster.sh up; say "cluster up: $(since "$s")s"
[ "${KEEP_CLUSTER:-}" = 1 ] || trap 'hack/cluster/cluster.sh down' EXIT
kubectl delete namespace gpu-demo gpu-demo-2 --ignore-not-found --wait=true >/dev/null
s=$(now); hack/cluster/deploy.sh h100x8; say "deploy: $(since "$s")s"
s=$(now)
skip=(); [ -z "${E2E_SKIP:-}" ] || skip=(-skip "$E2E_SKIP")
CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go test -count=1 -tags e2e -timeout "${E2E_TIMEOUT:-55m}" -run "${E2E_RUN:-.}" "${skip[@]}" -v ./test/e2e/ 2>&1 | grep -vE '^\s*$'
rc=${PIPESTATUS[0]}
say "e2e: $(since "$s")s"
exit "$rc"
