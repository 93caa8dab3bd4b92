#!/usr/bin/env bash
# Live check of the switch from NVIDIA's reference DRA driver (issue 51;
# docs/install.md "Moving from NVIDIA's reference DRA driver"), against
# NVIDIA's real kubelet plugin. Not part of CI: the module proxy does not
# serve NVIDIA's plugin or its NVML mock. Build them from their source
# first, as ../shared/tools/peer-nvd/README.md says (steps 1-4: /tmp/peer/bin/
# nvd-gpu-kubelet-plugin and nvidia-cdi-hook, /tmp/peer/droot with the mock
# libnvidia-ml and config/config.yaml).
#
# For MODE in drain and nodrain (default both): NVIDIA's plugin runs as a
# host process against the local cluster's kubelet and prepares a claim of
# a running pod; it is stopped; this chart is installed (simulated GPUs);
# then the pod ends (kubectl drain, or the pod deleted). It checks that
# nothing of NVIDIA's is touched while the pod runs (its checkpoint and CDI
# spec stay, the claim's device is refused to another claim), that the pod
# ends without a person (no force-delete, no file moved), that the plugin
# becomes ready, the checkpoint is renamed and ReferenceDriverClaimsGone
# posted, and that a new pod then gets every GPU. KEEP_CLUSTER=1 keeps the
# cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/cluster/lib.sh
P=${PEER_DIR:-/tmp/peer}
for f in "$P/bin/nvd-gpu-kubelet-plugin" "$P/bin/nvidia-cdi-hook" "$P/droot/config/config.yaml"; do
  [ -e "$f" ] || { echo "missing $f: build NVIDIA's plugin and NVML mock as ../shared/tools/peer-nvd/README.md says" >&2; exit 2; }
done
lock_cluster
export KUBECONFIG=$KUBECONFIG_PATH CONTAINERD_ADDRESS=$CTRD_SOCK
hack/cluster/build.sh all
hack/cluster/cluster.sh up
nvd=
# NVIDIA's plugin goes with this script, whatever step failed (it does not
# inherit the cluster lock: 9>&-). The test's namespace goes first, while this chart's plugin can unprepare
# its claims: a pod left behind would hold every GPU for the next user.
cleanup() {
  set +e
  [ -z "$nvd" ] || kill "$nvd" 2>/dev/null
  kubectl delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s >/dev/null 9>&-
  rm -f "$PLUGIN_DIR"/checkpoint.json* "$PLUGIN_DIR"/cp.lock "$PLUGIN_DIR"/pu.lock # NVIDIA's files
  [ "${KEEP_CLUSTER:-}" = 1 ] || hack/cluster/cluster.sh down
}
trap cleanup EXIT
NODE=$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')
PLUGIN_DIR=$KUBELET_DIR/plugins/gpu.nvidia.com
CDI_DIR=${CDI_DIR:-/var/run/cdi}
NS=nvd-switch
fail() { echo "FAIL: $*" >&2; exit 1; }

claim_and_pod() { # name
  kubectl apply -f - <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1, namespace: $NS}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 5
  restartPolicy: Never
  resourceClaims: [{name: gpu, resourceClaimName: $1}]
  containers:
  - name: c
    image: ${PAUSE_IMAGE:-registry.k8s.io/pause:3.10.2}
    resources: {claims: [{name: gpu}]}
YAML
}

run_mode() { # drain|nodrain
  local mode=$1
  say "== $mode"
  # The pods of the last mode end while this chart's plugin can still
  # unprepare their claims, then the chart goes.
  kubectl delete namespace $NS --ignore-not-found --wait=true >/dev/null
  helm uninstall gpu-dra-driver -n gpu-dra-driver --wait >/dev/null 2>&1 || true
  kubectl create namespace $NS >/dev/null
  rm -f "$PLUGIN_DIR"/checkpoint.json*
  # The DeviceClass NVIDIA's chart installs (deviceclass-gpu.yaml at
  # 9593204); its plugin runs here without its chart.
  kubectl delete deviceclass gpu.nvidia.com --ignore-not-found >/dev/null
  kubectl apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}
  extendedResourceName: nvidia.com/gpu
YAML
  # NVIDIA's plugin, flags as ../shared/tools/peer-nvd/run.sh uses them.
  MOCK_NVML_CONFIG=$P/droot/config/config.yaml "$P/bin/nvd-gpu-kubelet-plugin" --kubeconfig="$KUBECONFIG" --node-name="$NODE" \
    --cdi-root="$CDI_DIR" --kubelet-registrar-directory-path="$KUBELET_DIR/plugins_registry" --kubelet-plugins-directory-path="$KUBELET_DIR/plugins" \
    --nvidia-driver-root="$P/droot" --container-driver-root="$P/droot" --nvidia-cdi-hook-path="$P/bin/nvidia-cdi-hook" --image-name=none \
    >"/tmp/nvd-switch-$mode.log" 2>&1 9>&- &
  nvd=$!
  for _ in $(seq 60); do kubectl get resourceslices -o name | grep -q . && break; sleep 1; done
  claim_and_pod held
  kubectl wait -n $NS pod/held --for=condition=Ready --timeout=120s
  local uid; uid=$(kubectl get resourceclaim -n $NS held -o jsonpath='{.metadata.uid}')
  local spec=$CDI_DIR/k8s.gpu.nvidia.com-claim_$uid.yaml
  [ -f "$spec" ] || fail "NVIDIA's plugin wrote no CDI spec $spec"
  kill "$nvd"; wait "$nvd" || true
  nvd=
  say "NVIDIA's plugin prepared claim $uid and stopped; installing this chart"
  # The hand-over of the class docs/install.md gives, then this chart
  # without --wait: its plugin is not ready while it holds NVIDIA's claim.
  kubectl annotate deviceclass gpu.nvidia.com meta.helm.sh/release-name=gpu-dra-driver meta.helm.sh/release-namespace=gpu-dra-driver --overwrite >/dev/null
  kubectl label deviceclass gpu.nvidia.com app.kubernetes.io/managed-by=Helm --overwrite >/dev/null
  HELM_WAIT= hack/cluster/deploy.sh h100x8
  for _ in $(seq 120); do
    kubectl get pods -n gpu-dra-driver -l app.kubernetes.io/name=gpu-dra-driver -o name 2>/dev/null | grep -q . && break; sleep 1
  done
  sleep 15 # its start: the take-over, the event
  # While the pod runs: nothing of NVIDIA's touched, not ready, named by UID.
  [ -f "$PLUGIN_DIR/checkpoint.json" ] || fail "checkpoint.json moved while its claim is in use"
  [ -f "$spec" ] || fail "NVIDIA's CDI spec removed while its claim is in use"
  local pod; pod=$(kubectl get pods -n gpu-dra-driver -l app.kubernetes.io/name=gpu-dra-driver -o jsonpath='{.items[0].metadata.name}')
  kubectl get events -n default --field-selector reason=ReferenceDriverClaims -o jsonpath='{.items[*].message}' | grep -q "uid $uid" || fail "no ReferenceDriverClaims event naming $uid"
  kubectl get pod -n gpu-dra-driver "$pod" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -q False || fail "ready while a claim of NVIDIA's is held"
  # The pod ends with no manual step.
  if [ "$mode" = drain ]; then
    kubectl drain "$NODE" --force --ignore-daemonsets --delete-emptydir-data --pod-selector=app!=none --timeout=120s >/dev/null
    kubectl uncordon "$NODE" >/dev/null
  else
    kubectl delete pod -n $NS held --wait=true --timeout=120s
  fi
  kubectl wait -n gpu-dra-driver pod/"$pod" --for=condition=Ready --timeout=120s
  [ -f "$PLUGIN_DIR/checkpoint.json.migrated" ] || fail "checkpoint not renamed"
  [ ! -f "$spec" ] || fail "NVIDIA's CDI spec left"
  kubectl get events -n default --field-selector reason=ReferenceDriverClaimsGone -o name | grep -q . || fail "no ReferenceDriverClaimsGone event"
  # A new pod gets every GPU.
  local n; n=$(kubectl get resourceslices -o json | grep -c '"name": "gpu-[0-9]*"' || true)
  kubectl delete resourceclaim -n $NS held --ignore-not-found >/dev/null
  kubectl apply -f - <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: all, namespace: $NS}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}
YAML
  kubectl apply -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: all, namespace: $NS}
spec:
  restartPolicy: Never
  resourceClaims: [{name: gpu, resourceClaimName: all}]
  containers:
  - {name: c, image: "${PAUSE_IMAGE:-registry.k8s.io/pause:3.10.2}", resources: {claims: [{name: gpu}]}}
YAML
  kubectl wait -n $NS pod/all --for=condition=Ready --timeout=120s
  say "PASS $mode: pod ended without a person, plugin ready, checkpoint renamed, a new pod got every GPU ($n published)"
}

for mode in ${MODE:-drain nodrain}; do run_mode "$mode"; done
