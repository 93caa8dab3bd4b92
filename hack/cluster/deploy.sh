#!/usr/bin/env bash
# Builds the driver image from this checkout, imports it into the local
# cluster's containerd and installs (or upgrades) the Helm chart with
# simulated GPUs; GPU 7 (FRACTIONAL_GPUS) is offered for memory-fraction
# sharing. The admission webhook runs on the host network (one replica):
# pods here cannot reach the loopback-only apiserver otherwise.
# NODE_MODE=devices deploys the "devices" node mode instead of "files":
# only the GPUs simulated, NVIDIA's R535 userspace real (driver-root.sh),
# nvidia-cdi-hook installed under the kubelet directory, and the cudaprobe
# workload image imported (docs/simulator.md, "Node modes").
# Usage: deploy.sh [PROFILE]   (default h100x8)
# On a cluster with extra nodes (NODES=2, nodes.sh) each of them simulates
# EXTRA_NODE_PROFILE (default a100-80gbx4) through simulate.nodeProfiles,
# gets the driver image too, and publishes its own pool.
# CHART=<dir> IMAGE_TAG=<tag> deploy.sh installs another chart with an image
# already in containerd instead (the upgrade e2e installs an earlier
# release's chart and image that way).
# VALUES=<file> installs with that values file over the chart's defaults,
# and without GPU 7's memory fractions: the file chooses how GPUs are
# shared (hack/nvidia-e2e.sh: docs/examples/consumable-shares.yaml).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nodes.sh"
export KUBECONFIG=$KUBECONFIG_PATH CONTAINERD_ADDRESS=$CTRD_SOCK
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PROFILE=${1:-h100x8}
EXTRA_NODE_PROFILE=${EXTRA_NODE_PROFILE:-a100-80gbx4}
# The extra nodes that run, whatever NODES says here.
extra=$(extra_nodes)
NAMESPACE=${NAMESPACE:-gpu-dra-driver}
RELEASE=${RELEASE:-gpu-dra-driver}

CHART=${CHART:-$REPO/deployments/helm/gpu-dra-driver}

if [ -n "${IMAGE_TAG:-}" ]; then
  tag=$IMAGE_TAG
else
  # The tag changes with the code, so a changed driver rolls out.
  tag=$(cd "$REPO" && { git rev-parse --short HEAD 2>/dev/null || echo dev; } )-$(cd "$REPO" && git diff HEAD 2>/dev/null | sha256sum | cut -c1-8)
  s=$(now)
  tarball=$("$(dirname "$0")/images.sh" driver "$REPO" "$tag" | tail -1)
  ctr -n k8s.io images import --platform linux/amd64 "$tarball" >/dev/null
  say "driver image localhost/gpu-dra-driver:$tag built and imported in $(since "$s")s"
fi
if [ -n "$extra" ]; then
  # The extra nodes get node 1's copy: the image the caller imported there
  # (IMAGE_TAG: the upgrade and rollback e2e), or the one just built, whose
  # tarball another checkout's build may be rewriting by now.
  s=$(now)
  ctr -n k8s.io images export --platform linux/amd64 "$CLUSTER/image.tar" "localhost/gpu-dra-driver:$tag"
  for i in $extra; do node_ctr "$i" images import --platform linux/amd64 "$CLUSTER/image.tar" >/dev/null; done
  rm -f "$CLUSTER/image.tar"
  say "driver image imported into $(for i in $extra; do node_name "$i"; done | xargs) in $(since "$s")s"
fi

mode_args=()
if [ "${NODE_MODE:-files}" = devices ]; then
  s=$(now)
  root=$("$(dirname "$0")/driver-root.sh")
  # The chart mounts driverRoot with HostToContainer propagation, which
  # needs a shared mount: the root is bind-mounted under the cluster's
  # directory (cluster.sh down unmounts it).
  mkdir -p "$CLUSTER/driver-root"
  mountpoint -q "$CLUSTER/driver-root" || mount --bind "$root" "$CLUSTER/driver-root"
  mount --make-shared "$CLUSTER/driver-root"
  # The extra nodes' mount namespaces see the host's later mounts only
  # where the host's parent mount propagates (not where / is private, as
  # on this project's machines): each gets its own shared bind.
  for i in $extra; do
    ns=$(node_pid "$i" ns)
    [ -n "$ns" ] && [ -e "/proc/$ns/ns/mnt" ] || die "$(node_name "$i")'s mount namespace is not running: hack/cluster/cluster.sh up"
    nsenter -t "$ns" -m -- sh -c "mountpoint -q '$CLUSTER/driver-root' || mount --bind '$root' '$CLUSTER/driver-root'; mount --make-shared '$CLUSTER/driver-root'"
  done
  root=$CLUSTER/driver-root
  probe=$("$(dirname "$0")/images.sh" cudaprobe "$REPO" | tail -1)
  ctr -n k8s.io images import --platform linux/amd64 "$probe" >/dev/null
  for i in $extra; do node_ctr "$i" images import --platform linux/amd64 "$probe" >/dev/null; done
  say "driver root $root and localhost/cudaprobe:e2e ready in $(since "$s")s"
  mode_args=(--set simulate.nodeMode=devices --set driverRoot="$root" --set cdiHook.installDir="$KUBELET_DIR/gpu-dra-driver/bin")
fi

# sharing.mps.shareAcrossNamespaces: the demo (demo/specs/06) puts memory
# fractions of gpu-demo and gpu-demo-2 on GPU 7, one MPS daemon. A trust
# decision: MPS clients of one server are not isolated from each other;
# clusters whose namespaces are tenants leave it off (docs/sharing.md).
# TestMPSTenantIsolation turns it off for its own run. An earlier release's
# chart (CHART=, the rollback e2e) has no such value and shares anyway.
mps_args=()
sharing_args=(--set sharing.fractionalMemory=true --set "sharing.fractionalMemoryGPUs={${FRACTIONAL_GPUS:-7}}")
[ -z "${VALUES:-}" ] || sharing_args=(-f "$VALUES")
# helm show values reads a chart directory and a release's .tgz alike.
values=$(helm show values "$CHART" 2>/dev/null)
grep -q shareAcrossNamespaces <<<"$values" && mps_args=(--set sharing.mps.shareAcrossNamespaces=true)
# The extra nodes' model; an earlier release's chart, which has no
# simulate.nodeProfiles, simulates PROFILE on every node.
node_args=()
if grep -q nodeProfiles <<<"$values"; then
  for i in $extra; do node_args+=(--set "simulate.nodeProfiles.$(node_name "$i")=$EXTRA_NODE_PROFILE"); done
fi
# Pod Security: the cluster enforces baseline where a namespace says nothing
# (cluster.sh); the plugin's pods need privileged, as docs/install.md says.
kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$NAMESPACE" --overwrite pod-security.kubernetes.io/enforce=privileged \
  pod-security.kubernetes.io/warn=privileged pod-security.kubernetes.io/audit=privileged >/dev/null
s=$(now)
helm upgrade --install "$RELEASE" "$CHART" "${mode_args[@]}" "${mps_args[@]}" "${sharing_args[@]}" "${node_args[@]}" \
  --namespace "$NAMESPACE" --create-namespace ${HELM_WAIT---wait} --timeout 120s \
  --set image.tag="$tag" --set image.pullPolicy=Never \
  --set simulate.profile="$PROFILE" \
  --set kubeletDir="$KUBELET_DIR" \
  --set kubeletPlugin.hostNetwork=true \
  --set kubeletPlugin.apiServer.host=127.0.0.1 --set-string kubeletPlugin.apiServer.port=6443 \
  --set webhook.hostNetwork=true --set webhook.replicas=1 \
  --set webhook.apiServer.host=127.0.0.1 --set-string webhook.apiServer.port=6443 >/dev/null
say "chart $CHART installed in $(since "$s")s (release $RELEASE, namespace $NAMESPACE, image tag $tag, profile $PROFILE, node mode ${NODE_MODE:-files}${VALUES:+, values $VALUES})"
for node in "$NODE" $(for i in $extra; do node_name "$i"; done); do
  for _ in $(seq 1 100); do
    n=$(kubectl get resourceslices --field-selector "spec.nodeName=$node,spec.driver=gpu.nvidia.com" -o name 2>/dev/null | wc -l)
    [ "$n" -gt 0 ] && break; sleep 0.2
  done
  say "ResourceSlices of $node: $(kubectl get resourceslices --field-selector spec.nodeName="$node" -o name | wc -l)"
done
