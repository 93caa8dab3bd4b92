#!/usr/bin/env bash
# Churn-and-kill test on a real local cluster (make chaos): builds what is
# missing (cached), brings the cluster up (or reuses it), installs the chart
# with simulated H100s (dynamic MIG, GPU 7 offered for memory fractions) and
# runs TestChaos (test/e2e/chaos_test.go, build tags e2e,chaos):
# CHAOS_ROUNDS rounds (default 3) of pods with whole GPUs, a MIG pair, a
# time-sliced shared claim and memory fractions, the plugin SIGKILLed during
# prepare and during unprepare; at the end nothing may be left on the node.
# CHAOS_SEED repeats a run's random choices, CHAOS_STRICT_STATUS=1 also
# fails on claims without device status; KEEP_CLUSTER=1 leaves the cluster
# running.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/cluster/lib.sh
lock_cluster
export KUBECONFIG=$KUBECONFIG_PATH CONTAINERD_ADDRESS=$CTRD_SOCK GPU_DRA_KUBELET_DIR=$KUBELET_DIR
export CHAOS_ROUNDS=${CHAOS_ROUNDS:-3}
t0=$(now)
s=$(now); hack/cluster/build.sh all; say "build: $(since "$s")s"
s=$(now); hack/cluster/cluster.sh up; say "cluster up: $(since "$s")s"
[ "${KEEP_CLUSTER:-}" = 1 ] || trap 'hack/cluster/cluster.sh down' EXIT
# Claims of earlier demo or e2e runs would hold GPUs and leave node state.
kubectl delete namespace gpu-demo gpu-demo-2 gpu-chaos --ignore-not-found --wait=true >/dev/null
s=$(now); hack/cluster/deploy.sh h100x8; say "deploy: $(since "$s")s"
# The kubelet's restart back-off of the plugin container grows with every
# kill (none, 10 s, doubling to 5 min) and resets only after 10 min; a
# plugin pod that earlier runs on a kept cluster killed starts over fresh.
if [ "$(kubectl get pods -n gpu-dra-driver -l app.kubernetes.io/name=gpu-dra-driver -o jsonpath='{..restartCount}')" != 0 ]; then
  kubectl rollout restart daemonset -n gpu-dra-driver >/dev/null
  kubectl rollout status daemonset -n gpu-dra-driver --timeout=120s >/dev/null
  say "plugin pod replaced (its container had restarted)"
fi
s=$(now)
set +e
CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go test -count=1 -tags e2e,chaos -run '^TestChaos$' -timeout $((20 + CHAOS_ROUNDS * 12))m -v ./test/e2e/ 2>&1 | grep --line-buffered -vE '^\s*$'
rc=${PIPESTATUS[0]}
set -e
say "chaos: $(since "$s")s ($CHAOS_ROUNDS rounds), total $(since "$t0")s, exit $rc"
exit "$rc"
