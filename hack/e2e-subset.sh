#!/usr/bin/env bash
# hack/e2e-subset.sh VERSION: the e2e subset on an older Kubernetes minor
# than the default cluster's (1.38): 1.37.2 (make e2e-1.37) and the oldest
# the chart admits, 1.36.5 (Chart.yaml kubeVersion; make e2e-oldest), built
# from source like 1.38 and cached by version under
# $CACHE/bin/kubernetes-v<version>. It runs with Kubernetes' own defaults:
# no feature gate and no API version beyond them (DRA_GATES= and
# RUNTIME_CONFIG=, see hack/cluster/cluster.sh), resource.k8s.io/v1beta1
# and v1beta2 off, so what passes here is what a stock cluster of that
# minor runs. Every feature the chart turns on by default is on by default
# in 1.36 (k8s.io/kubernetes v1.36.5 pkg/features/kube_features.go):
# DRAPartitionableDevices (dynamic MIG), DRAConsumableCapacity (memory
# fractions), DRAExtendedResource (nvidia.com/gpu, nvidia.com/mig-*) and
# DRADeviceTaints (health taints) beta and on since 1.36, DRAAdminAccess
# (monitor devices) and DRAPrioritizedList GA in 1.36,
# DRAResourceClaimGranularStatusAuthorization (resourceclaims/driver,
# associated-node verbs) beta and on since 1.36; in 1.35 the first four
# are alpha and off. None of them needs a gate turned on here.
#
# The subset (E2E_SUBSET) covers each of those features: whole GPUs,
# time-slicing, MPS, dynamic MIG, memory fractions and nvidia.com/gpu
# (TestDriver), nvidia.com/mig-* classes (TestMigExtendedResources), the
# webhook (TestWebhook), the admission policies (TestDriver's
# NodeRestrictionPolicy, TestPluginTokenConfinedByPolicy), admin access on
# a busy MIG node (TestAdminMonitorOnBusyMIGNode), device taints
# (TestHealthXID) and a reboot (TestNodeReboot).
#
# The cluster lock is hack/e2e.sh's; a default cluster that ran before is
# started again afterwards (with the default settings), so the shared
# cluster is not left down for the next user.
#   VERSION  1.36.5 and 1.37.2 are the newest patches of those minors the Go
#            module proxy serves
#   E2E_RUN  another test regexp instead of the subset
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/cluster/lib.sh
E2E_SUBSET='^(TestDriver|TestMigExtendedResources|TestWebhook|TestPluginTokenConfinedByPolicy|TestAdminMonitorOnBusyMIGNode|TestHealthXID|TestNodeReboot)$'
version=${1:?usage: $0 VERSION (e.g. 1.37.2)}
running_before=0
if p=$(cat "$PIDS/kubelet" 2>/dev/null) && kill -0 "$p" 2>/dev/null; then running_before=1; fi
restore() {
  local rc=$?
  if [ "$running_before" = 1 ]; then
    # The default cluster again (its own settings, not this run's), under
    # the lock like every other user of it.
    (unset K8S_VERSION DRA_GATES RUNTIME_CONFIG; source hack/cluster/lib.sh; lock_cluster
     hack/cluster/build.sh all >/dev/null && hack/cluster/cluster.sh up) || say "could not start the default cluster again"
  fi
  exit "$rc"
}
trap restore EXIT
s=$(now)
# hack/e2e.sh builds what is missing (this version's Kubernetes: 35
# minutes cold on 2 busy cores, seconds when cached), restarts the cluster
# with these settings (cluster.sh up compares what it runs with) and takes
# it down afterwards unless KEEP_CLUSTER=1.
K8S_VERSION=$version DRA_GATES= RUNTIME_CONFIG= E2E_RUN=${E2E_RUN:-$E2E_SUBSET} hack/e2e.sh
say "e2e subset on Kubernetes v$version: $(since "$s")s"
