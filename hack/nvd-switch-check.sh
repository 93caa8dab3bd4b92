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
# host process against the local cluster's kubelet and prepares the claims
# of running pods: a whole GPU, a time-sliced GPU (GpuConfig TimeSlicing,
# Long) and an MPS GPU (GpuConfig MPS: NVIDIA's control daemon Deployment in
# its namespace, NVD_NS); it is stopped; this chart is installed (simulated
# GPUs, takeover.nvidiaNamespace=NVD_NS); then the pods end (kubectl drain,
# or the pods deleted). It checks that nothing of NVIDIA's is touched while
# the pods run (its checkpoint, CDI specs and MPS daemon stay, the plugin is
# not ready and names each claim), that the pods end without a person (no
# force-delete, no file moved), that the plugin becomes ready, the
# checkpoint is renamed, NVIDIA's CDI specs, MPS Deployment and MPS
# directory are gone (but for its emptied shm tmpfs, which a plugin without
# CAP_SYS_ADMIN cannot unmount) and ReferenceDriverClaimsGone posted, and that a new
# pod then gets every GPU. KEEP_CLUSTER=1 keeps the cluster.
#
# No MIG claim: NVIDIA's NVML mock (NVIDIA/k8s-test-infra pkg/gpu/mocknvml
# at 3b2b865) stubs GPU instance creation (nvmlDeviceCreateGpuInstance) and
# lists no MIG device, so NVIDIA's plugin on it can prepare none, static or
# dynamic. The release of NVIDIA's MIG claims is held by pkg/driver's
# TestTakesOverReferenceDriverClaims, TestReferenceSharedMigKeptWhileShared
# and TestReferenceMigModeOffAfterLastMigDevice, on checkpoints written as
# NVIDIA's plugin writes them.
#
# NVIDIA's MPS daemon on its mock: NVIDIA's plugin renders its Deployment
# from /templates/mps-control-daemon.tmpl.yaml (a fixed path; copied there
# from NVIDIA's source, $P/nvd, and removed afterwards) with the image
# given (the cluster's busybox: no registry here), and its pod runs the
# driver root's nvidia-cuda-mps-control, which this script puts there as a
# stub that starts nothing (no GPU): what is checked is the Deployment, the
# compute mode call and the MPS directories NVIDIA's plugin makes, and
# their release.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/cluster/lib.sh
P=${PEER_DIR:-/tmp/peer}
for f in "$P/bin/nvd-gpu-kubelet-plugin" "$P/bin/nvidia-cdi-hook" "$P/droot/config/config.yaml" "$P/nvd/templates/mps-control-daemon.tmpl.yaml"; do
  [ -e "$f" ] || { echo "missing $f: build NVIDIA's plugin and NVML mock as ../shared/tools/peer-nvd/README.md says" >&2; exit 2; }
done
lock_cluster
export KUBECONFIG=$KUBECONFIG_PATH CONTAINERD_ADDRESS=$CTRD_SOCK
hack/cluster/build.sh all
hack/cluster/cluster.sh up
nvd=
nvd_specs=() # NVIDIA's CDI specs, for the cleanup of a failed run
NVD_NS=${NVD_NS:-nvidia-dra-driver-gpu}
# The MPS daemon's image and the stub its pod runs (see above).
MPS_IMAGE=${MPS_IMAGE:-localhost/busybox:latest}
cat > "$P/droot/usr/bin/nvidia-cuda-mps-control" <<'SH'
#!/bin/sh
# A stand-in for NVIDIA's MPS control (hack/nvd-switch-check.sh): -d "starts"
# the daemon (its log, which the pod follows); a command on stdin is taken.
[ "$1" = -d ] && : >> "${CUDA_MPS_LOG_DIRECTORY:-/var/log/nvidia-mps}/control.log"
exit 0
SH
chmod +x "$P/droot/usr/bin/nvidia-cuda-mps-control"
made_templates=
if [ ! -e /templates/mps-control-daemon.tmpl.yaml ]; then
  [ -d /templates ] || made_templates=dir
  mkdir -p /templates && cp "$P/nvd/templates/mps-control-daemon.tmpl.yaml" /templates/
  [ -n "$made_templates" ] || made_templates=file
fi
values=$(mktemp --suffix=.yaml)
printf 'takeover:\n  nvidiaNamespace: %s\n' "$NVD_NS" > "$values"
# NVIDIA's plugin goes with this script, whatever step failed (it does not
# inherit the cluster lock: 9>&-). The test's namespace goes first, while this chart's plugin can unprepare
# its claims: a pod left behind would hold every GPU for the next user.
cleanup() {
  set +e
  [ -z "$nvd" ] || kill "$nvd" 2>/dev/null
  kubectl delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s >/dev/null 9>&-
  kubectl delete namespace "$NVD_NS" --ignore-not-found --wait=true --timeout=120s >/dev/null 9>&-
  # A failed run can stop with the node cordoned (drain) and NVIDIA's CDI
  # specs on it, which the e2e suite's cleanliness checks would then count.
  kubectl uncordon "$NODE" >/dev/null 2>&1 9>&-
  [ ${#nvd_specs[@]} -eq 0 ] || rm -f "${nvd_specs[@]}"
  rm -f "$PLUGIN_DIR"/checkpoint.json* "$PLUGIN_DIR"/cp.lock "$PLUGIN_DIR"/pu.lock # NVIDIA's files
  # NVIDIA's MPS directories: a failed run's, and the emptied tmpfs a
  # plugin without CAP_SYS_ADMIN leaves.
  local m; for m in $(findmnt -rn -o TARGET | grep "^$PLUGIN_DIR/mps/" || true); do umount "$m"; done
  rm -rf "$PLUGIN_DIR/mps"
  case $made_templates in dir) rm -rf /templates ;; file) rm -f /templates/mps-control-daemon.tmpl.yaml ;; esac
  rm -f "$values"
  # The default deploy back for the next user (this chart went in with
  # takeover.nvidiaNamespace, a namespace now gone).
  if [ "${KEEP_CLUSTER:-}" = 1 ]; then hack/cluster/deploy.sh h100x8 >/dev/null; else hack/cluster/cluster.sh down; fi
}
trap cleanup EXIT
# NODE (lib.sh): this host's node, whose kubelet is $KUBELET_DIR's; not the
# first node listed, which NODES=2 may make another.
PLUGIN_DIR=$KUBELET_DIR/plugins/gpu.nvidia.com
CDI_DIR=${CDI_DIR:-/var/run/cdi}
NS=nvd-switch
fail() { echo "FAIL: $*" >&2; exit 1; }

# claim_and_pod NAME [SHARING]: a claim of one GPU, with NVIDIA's GpuConfig
# sharing (JSON) when given, and a pod using it.
claim_and_pod() {
  local config=
  [ -z "${2:-}" ] || config="
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: $2}"
  kubectl apply -f - <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1, namespace: $NS}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}$config
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
  # NVIDIA's namespace: its MPS daemon pods are privileged, on the host's
  # PID namespace and paths, as NVIDIA's chart's namespace allows.
  kubectl create namespace "$NVD_NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl label namespace "$NVD_NS" --overwrite pod-security.kubernetes.io/enforce=privileged >/dev/null
  rm -f "$PLUGIN_DIR"/checkpoint.json*
  # The last mode's emptied tmpfs (below) goes, so that this mode's checks
  # of NVIDIA's MPS directory see only this mode's.
  local m; for m in $(findmnt -rn -o TARGET | grep "^$PLUGIN_DIR/mps/" || true); do umount "$m"; done
  rm -rf "$PLUGIN_DIR/mps"
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
    --nvidia-driver-root="$P/droot" --container-driver-root="$P/droot" --nvidia-cdi-hook-path="$P/bin/nvidia-cdi-hook" \
    --namespace="$NVD_NS" --feature-gates=TimeSlicingSettings=true,MPSSupport=true --image-name="$MPS_IMAGE" --image-pull-policy=IfNotPresent \
    >"/tmp/nvd-switch-$mode.log" 2>&1 9>&- &
  nvd=$!
  for _ in $(seq 60); do kubectl get resourceslices --field-selector spec.nodeName="$NODE" -o name | grep -q . && break; sleep 1; done
  claim_and_pod held
  claim_and_pod sliced '{strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}'
  claim_and_pod mps '{strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50}}'
  kubectl wait -n $NS pod/held pod/sliced pod/mps --for=condition=Ready --timeout=180s
  local c uids=() specs=()
  for c in held sliced mps; do
    uids+=("$(kubectl get resourceclaim -n $NS $c -o jsonpath='{.metadata.uid}')")
    specs+=("$CDI_DIR/k8s.gpu.nvidia.com-claim_${uids[-1]}.yaml")
    [ -f "${specs[-1]}" ] || fail "NVIDIA's plugin wrote no CDI spec ${specs[-1]} for claim $c"
    nvd_specs+=("${specs[-1]}")
  done
  local daemon; daemon=$(kubectl get deployments -n "$NVD_NS" -o name | grep mps-control-daemon) || fail "no MPS control daemon Deployment of NVIDIA's in $NVD_NS"
  ls -d "$PLUGIN_DIR"/mps/* >/dev/null 2>&1 || fail "NVIDIA's plugin made no MPS directory under $PLUGIN_DIR/mps"
  kill "$nvd"; wait "$nvd" || true
  nvd=
  say "NVIDIA's plugin prepared claims ${uids[*]} (whole, time-sliced, MPS: $daemon) and stopped; installing this chart"
  # The hand-over of the class docs/install.md gives, then this chart
  # without --wait: its plugin is not ready while it holds NVIDIA's claim.
  kubectl annotate deviceclass gpu.nvidia.com meta.helm.sh/release-name=gpu-dra-driver meta.helm.sh/release-namespace=gpu-dra-driver --overwrite >/dev/null
  kubectl label deviceclass gpu.nvidia.com app.kubernetes.io/managed-by=Helm --overwrite >/dev/null
  HELM_WAIT= VALUES=$values hack/cluster/deploy.sh h100x8
  for _ in $(seq 120); do
    kubectl get pods -n gpu-dra-driver -l app.kubernetes.io/name=gpu-dra-driver --field-selector spec.nodeName="$NODE" -o name 2>/dev/null | grep -q . && break; sleep 1
  done
  sleep 15 # its start: the take-over, the event
  # While the pod runs: nothing of NVIDIA's touched, not ready, named by UID.
  [ -f "$PLUGIN_DIR/checkpoint.json" ] || fail "checkpoint.json moved while its claims are in use"
  local spec uid
  for spec in "${specs[@]}"; do [ -f "$spec" ] || fail "NVIDIA's CDI spec $spec removed while its claim is in use"; done
  kubectl get -n "$NVD_NS" "$daemon" >/dev/null || fail "NVIDIA's MPS daemon $daemon removed while its claim is in use"
  local pod; pod=$(kubectl get pods -n gpu-dra-driver -l app.kubernetes.io/name=gpu-dra-driver --field-selector spec.nodeName="$NODE" -o jsonpath='{.items[0].metadata.name}')
  local events; events=$(kubectl get events -n default --field-selector reason=ReferenceDriverClaims -o jsonpath='{.items[*].message}')
  for uid in "${uids[@]}"; do grep -q "uid $uid" <<<"$events" || fail "no ReferenceDriverClaims event naming $uid: $events"; done
  kubectl get pod -n gpu-dra-driver "$pod" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -q False || fail "ready while claims of NVIDIA's are held"
  # The pods end with no manual step.
  if [ "$mode" = drain ]; then
    kubectl drain "$NODE" --force --ignore-daemonsets --delete-emptydir-data --pod-selector=app!=none --timeout=180s >/dev/null
    kubectl uncordon "$NODE" >/dev/null
  else
    kubectl delete pod -n $NS held sliced mps --wait=true --timeout=180s
  fi
  kubectl wait -n gpu-dra-driver pod/"$pod" --for=condition=Ready --timeout=180s
  [ -f "$PLUGIN_DIR/checkpoint.json.migrated" ] || fail "checkpoint not renamed"
  for spec in "${specs[@]}"; do [ ! -f "$spec" ] || fail "NVIDIA's CDI spec $spec left"; done
  ! kubectl get -n "$NVD_NS" "$daemon" >/dev/null 2>&1 || fail "NVIDIA's MPS daemon $daemon left"
  # NVIDIA's MPS directory goes, but for the tmpfs NVIDIA mounted at its
  # shm/: this chart's plugin on simulated GPUs has no CAP_SYS_ADMIN, so it
  # empties that mount and leaves it (pkg/driver/reference_shm.go,
  # docs/install.md); with CAP_SYS_ADMIN (real GPUs) it goes too.
  local d left=()
  for d in "$PLUGIN_DIR"/mps/*; do
    [ -e "$d" ] || continue
    [ "$(ls -A "$d")" = shm ] && findmnt -rn "$d/shm" >/dev/null && [ -z "$(ls -A "$d/shm")" ] ||
      fail "NVIDIA's MPS directory $d left with more than its emptied tmpfs: $(ls -AR "$d")"
    left+=("$d/shm")
  done
  [ ${#left[@]} -eq 0 ] || say "left as documented: NVIDIA's emptied tmpfs mounted at ${left[*]} (no CAP_SYS_ADMIN here)"
  kubectl get events -n default --field-selector reason=ReferenceDriverClaimsGone -o name | grep -q . || fail "no ReferenceDriverClaimsGone event"
  # A new pod gets every GPU.
  local n; n=$(kubectl get resourceslices --field-selector spec.nodeName="$NODE" -o json | grep -c '"name": "gpu-[0-9]*"' || true)
  kubectl delete resourceclaim -n $NS held sliced mps --ignore-not-found >/dev/null
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
  say "PASS $mode: whole, time-sliced and MPS pods ended without a person, plugin ready, checkpoint renamed, NVIDIA's specs, MPS daemon and directories gone, a new pod got every GPU ($n published)"
}

for mode in ${MODE:-drain nodrain}; do run_mode "$mode"; done
